#!/usr/bin/env bash
# The Python that runs the book's set-up, printed as a path; or one line on stderr that says why there is none
# and how to get one. The supported versions are pyproject.toml's `requires-python` (read here, declared there).
#
# Usage: tests/python_for_venv.sh VENV PYTHON ORIGIN
#   VENV    the virtual environment's folder: when it exists, its Python is the answer (when supported)
#   PYTHON  the interpreter to create it with
#   ORIGIN  "default" when PYTHON was not set (python3, then): the script may fall back from python3 to a
#           supported python3.X, and take the distribution's build of the version found (below); "asked" otherwise
#
# The distribution's build: with PYTHON not set, when $DISTRIBUTION_BIN (/usr/bin) holds python3.X of the version
# found on PATH (a pyenv or a hand-built one, say), the venv is made with it. Why: Debian and Ubuntu build their
# Python with profile-guided and link-time optimisation, into one binary; pyenv's default build has neither and
# calls the interpreter through a shared library. The test suite spends most of its time in Python code: on a
# 2-core Debian machine, `make test` took 819 core-seconds with Debian's build against 883 with pyenv's
# (2026-12-03, the same code, one run after the other), and pure-Python loops took a fifth less time.
set -uo pipefail
venv=$1 python=$2 origin=$3
distribution_bin=${DISTRIBUTION_BIN:-/usr/bin}
root=$(cd "$(dirname "$0")/.." && pwd)

spec=$(sed -n 's/^requires-python *= *"\(.*\)"$/\1/p' "$root/pyproject.toml")
low=$(sed -n 's/.*>= *3\.\([0-9]*\).*/\1/p' <<<"$spec")
below=$(sed -n 's/.*< *3\.\([0-9]*\).*/\1/p' <<<"$spec")
if [[ -z $low || -z $below ]]; then
  echo "error: pyproject.toml's requires-python ('$spec') should read '>=3.X,<3.Y'" >&2
  exit 1
fi
supported=()
for ((minor = below - 1; minor >= low; minor--)); do supported+=("3.$minor"); done  # newest first
names=$(printf '%s, ' "${supported[@]}" | sed 's/, $//; s/\(.*\), /\1 or /')
newest=${supported[0]}

version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
is_supported() { [[ " ${supported[*]} " == *" $1 "* ]]; }
how_to_get="install one (Debian/Ubuntu: sudo apt-get install python$newest-venv, where your release has it;\
 or pyenv install $newest) and run make again with PYTHON=python$newest"

if [[ -x $venv/bin/python ]]; then
  found=$(version_of "$venv/bin/python")
  if ! is_supported "$found"; then
    echo "error: $venv has Python ${found:-(broken)}; the book supports Python $names: remove $venv and run make again" >&2
    exit 1
  fi
  if [[ $origin != default ]]; then
    asked=$(version_of "$python")
    if [[ $asked != "$found" ]]; then
      echo "error: $venv has Python $found, and PYTHON=$python is Python ${asked:-(not found)}: remove $venv" \
        "to switch, or keep both with VENV=.venv-${asked:-X.Y}" >&2
      exit 1
    fi
  fi
  echo "$venv/bin/python"
  exit 0
fi

candidates=("$python")
if [[ $origin == default ]]; then
  for version in "${supported[@]}"; do candidates+=("python$version"); done
fi
for candidate in "${candidates[@]}"; do
  found=$(version_of "$candidate")
  if [[ -n $found ]] && is_supported "$found"; then
    if [[ $candidate != "$python" ]]; then
      echo "note: $python is Python ${first:-(not found)}; using $candidate (Python $found)" >&2
    fi
    chosen=$(command -v "$candidate")
    distribution=$distribution_bin/python$found
    if [[ $origin == default && -x $distribution && $(realpath "$distribution") != $(realpath "$chosen") \
          && $(version_of "$distribution") == "$found" ]]; then
      echo "note: using $distribution, the distribution's optimised build of Python $found, not $chosen" \
        "(PYTHON=$candidate keeps that one)" >&2
      chosen=$distribution
    fi
    echo "$chosen"
    exit 0
  fi
  first=${first-$found}
done
if [[ -z ${first-} ]]; then
  echo "error: '$python' was not found; the book needs Python $names: $how_to_get" >&2
else
  echo "error: $python is Python $first; the book needs Python $names: $how_to_get" >&2
fi
exit 1
