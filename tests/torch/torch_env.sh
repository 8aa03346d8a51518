# SPDX-License-Identifier: MIT
# torch_env.sh - sourced by the tests/torch/*.sh tests: finds the build
# tree's ibcoll_torch package and the Python it was built for, or prints
# the TAP skip line and exits when configure did not build the binding.
# Sets: pkg (PYTHONPATH entry), py (the interpreter), here (tests/torch).
pkg=$top_builddir/bindings/torch/pkg
here=$top_srcdir/tests/torch
if [ ! -f "$pkg/ibcoll_torch/_C.so" ] || [ ! -f "$pkg/PYTHON" ]; then
	echo "1..0 # SKIP torch backend not built (configure: no Python that imports torch, see its summary)"
	exit 0
fi
py=$(cat "$pkg/PYTHON")
PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
# no __pycache__ in the build tree's package (make distcleancheck)
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
# the ranks share 2 cores in CI: one intra-op thread each
OMP_NUM_THREADS=1
export OMP_NUM_THREADS
