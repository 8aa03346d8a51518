# SPDX-License-Identifier: MIT
# IBC_CHECK_CRYPTO: OpenSSL's libcrypto (HMAC-SHA256 for the authenticated
# bootstrap). Required: the bootstrap refuses to run unauthenticated.
# Sets CRYPTO_CFLAGS and CRYPTO_LIBS.
AC_DEFUN([IBC_CHECK_CRYPTO], [
PKG_CHECK_MODULES([CRYPTO], [libcrypto >= 1.1], [], [
	ibc_save_LIBS=$LIBS
	AC_CHECK_HEADER([openssl/hmac.h], [], [AC_MSG_ERROR([OpenSSL headers not found: apt-get install libssl-dev])])
	AC_CHECK_LIB([crypto], [HMAC], [CRYPTO_LIBS=-lcrypto], [AC_MSG_ERROR([libcrypto not found: apt-get install libssl-dev])])
	LIBS=$ibc_save_LIBS
])
AC_SUBST([CRYPTO_CFLAGS])
AC_SUBST([CRYPTO_LIBS])
])
