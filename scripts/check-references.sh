#!/usr/bin/env bash
# Fails when the repository refers to files or trackers that a user who clones
# it does not have, or uses the old numbered names of the algorithm families.
#
#   scripts/check-references.sh        (ctest: repository_references)
#
# Checked: every tracked file (git ls-files; every file outside .git, build*
# and node_modules when this is not a git checkout) except binary files, the
# fuzz corpus (tests/fuzz/corpus: arbitrary inputs), the datasets under data/
# (data/<name>/...) and this script. Refused:
#   * paths into the sibling reading-material folder outside the repository,
#     the internal design notes, section numbers of the implementation
#     notes and internal tracker numbers (the exact patterns are in
#     $references below): cite the paper by authors, year and equation,
#     docs/architecture.md for the invariants, docs/algorithms/<family>.md
#     for a family, or say it in words;
#   * "seed000".."seed004" (also "seed-001", "seed 2", "seed00{0,2}"): the
#     families are bilevel, piecewise_affine, accelerated, line_search and
#     distributed_dda; "seed" means a random seed only.
# Prints every offending line (path:line:text) and exits 1; otherwise prints
# "check-references: ok".
set -euo pipefail
export LC_ALL=C

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
self="scripts/check-references.sh"

# Written with bracket expressions so that this line does not itself contain
# what it looks for.
references='[.][.]/s[h]ared|s[h]ared/|design[.]md|spec [§]|[§] ?[0-9]|[Ii]ssue[s]? #?[0-9]+|[i]ssues were silent'
family_names='seed[ _-]?00([0-4]|\{)'

list_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z
  else
    find . -type f -not -path './.git/*' -not -path './build*' \
      -not -path '*/node_modules/*' -printf '%P\0'
  fi
}

files=()
while IFS= read -r -d '' f; do
  case "$f" in
    "$self" | tests/fuzz/corpus/* | data/*/*) continue ;;
  esac
  # Tracked but deleted in the work tree (e.g. in the middle of a rename).
  [[ -f "$f" ]] && files+=("$f")
done < <(list_files)

if [[ ${#files[@]} -eq 0 ]]; then
  echo "check-references: no files to check in $root" >&2
  exit 2
fi

# grep exits 1 when nothing matches; -I skips binary files, -H names the file.
search() {  # search GREP_OPTIONS PATTERN
  printf '%s\0' "${files[@]}" | xargs -0 grep -nIH "$1" -e "$2" -- || true
}

status=0
hits="$(search -E "$references")"
if [[ -n "$hits" ]]; then
  echo "check-references: references to files or trackers a clone does not have" \
       "(the sibling reading-material folder, the internal design notes, spec sections, tracker numbers):"
  echo "$hits"
  status=1
fi
hits="$(search -iE "$family_names")"
if [[ -n "$hits" ]]; then
  [[ $status -eq 0 ]] || echo
  echo "check-references: old family names (seed000..seed004; use bilevel," \
       "piecewise_affine, accelerated, line_search, distributed_dda):"
  echo "$hits"
  status=1
fi
if [[ $status -ne 0 ]]; then
  echo
  echo "check-references: FAILED (see the header of $self for what to write instead)"
  exit 1
fi
echo "check-references: ok"
