#!/bin/sh
# Regenerate the build system (configure, Makefile.in, libtool) from configure.ac.
set -e
cd "$(dirname "$0")"
autoreconf -fi
