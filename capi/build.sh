#!/usr/bin/env bash
# capi/build.sh --mpi openmpi|mpich|none OUT
#
# Builds what C, C++ and Fortran codes link against:
#   OUT/lib/libftigo.so              FTI's C API (and the Fortran module's procedures)
#   OUT/include/fti.h, ftigo.h       the C headers
#   OUT/include/fti.mod              the compiled Fortran module fti
#   OUT/lib/pkgconfig/ftigo.pc       pkg-config's description
# for the MPI the application uses (MPI_Comm differs between Open MPI and
# MPICH), or none: the serial library (one rank, no MPI; ftigo.h's
# ftigo_init_f instead of FTI_Init). The Fortran module is built when the
# MPI's Fortran compiler (mpifort.openmpi, mpifort.mpich; gfortran for
# none) is installed; FTIGO_FORTRAN=0 skips it, FTIGO_FORTRAN=1 requires it.
# Compile and link with:
#   mpicc   prog.c   -I OUT/include -L OUT/lib -lftigo -Wl,-rpath,OUT/lib
#   mpifort prog.f90 -I OUT/include -L OUT/lib -lftigo -Wl,-rpath,OUT/lib
set -euo pipefail

usage() { echo "usage: $0 --mpi openmpi|mpich|none OUT" >&2; exit 2; }
mpi="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi) [ $# -ge 2 ] || usage; mpi=$2; shift 2 ;;
    --mpi=*) mpi=${1#--mpi=}; shift ;;
    -h|--help) usage ;;
    -*) echo "$0: unknown flag $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1; shift ;;
  esac
done
[ -n "$mpi" ] && [ -n "$out" ] || usage
case "$mpi" in
  openmpi) tags="mpi"; fc=mpifort.openmpi; pcreq="ompi" ;;
  mpich) tags="mpi mpich"; fc=mpifort.mpich; pcreq="mpich" ;;
  none) tags="serial"; fc=gfortran; pcreq="" ;;
  *) echo "$0: --mpi must be openmpi, mpich or none, not $mpi" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/lib/pkgconfig" "$out/include"
out=$(cd "$out" && pwd)

fortran=${FTIGO_FORTRAN:-auto}
if [ "$fortran" = auto ]; then
  if command -v "$fc" >/dev/null && command -v gfortran >/dev/null; then fortran=1; else fortran=0; fi
fi
if [ "$fortran" = 1 ]; then
  command -v "$fc" >/dev/null || { echo "$0: $fc not found (FTIGO_FORTRAN=1)" >&2; exit 1; }
  tags="$tags fortran"
fi

go=${GO:-go}
(cd "$root" && "$go" build -buildmode=c-shared -tags "$tags" -o "$out/lib/libftigo.so" ./capi)
rm -f "$out/lib/libftigo.h" # cgo's own header: applications include fti.h
cp "$root/capi/include/fti.h" "$root/capi/include/ftigo.h" "$out/include/"
if [ "$fortran" = 1 ]; then
  # The module's procedures are in libftigo.so; this compiles fti.mod.
  tmp=$(mktemp -d)
  "$fc" -c -J "$out/include" -o "$tmp/fti.o" "$root/capi/fortran/fti.f90"
  rm -rf "$tmp"
fi

version=$(cd "$root" && git describe --always --dirty 2>/dev/null || echo dev)
{
  echo "prefix=$out"
  echo 'libdir=${prefix}/lib'
  echo 'includedir=${prefix}/include'
  echo
  echo "Name: ftigo"
  echo "Description: FTI's C and Fortran API on ftigo ($mpi)"
  echo "Version: $version"
  [ -z "$pcreq" ] || echo "Requires.private: $pcreq"
  echo 'Cflags: -I${includedir}'
  echo 'Libs: -L${libdir} -lftigo -Wl,-rpath,${libdir}'
} > "$out/lib/pkgconfig/ftigo.pc"
echo "built $out (MPI: $mpi, Fortran module: $([ "$fortran" = 1 ] && echo yes || echo no))"
