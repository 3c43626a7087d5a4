#!/usr/bin/env bash
# The Python that runs the book's set-up, printed as a path; or one line on stderr that says why there is none
# and how to get one. The supported versions are pyproject.toml's `requires-python` (read here, declared there).
#
# Usage: tests/python_for_venv.sh VENV PYTHON ORIGIN
#   VENV    the virtual environment's folder: when it exists, its Python is the answer (when supported)
#   PYTHON  the interpreter to create it with
#   ORIGIN  make's $(origin PYTHON): "default" lets the script fall back from python3 to a supported python3.X
set -uo pipefail
venv=$1 python=$2 origin=$3
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
    command -v "$candidate"
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
