#!/usr/bin/env bash
# corelines.sh counts the core's non-test Go lines (every line: code, comments and
# blank lines) at two commits, and splits the change between them by the issue each
# commit served, so that issue 26's "the core's line count falls like for like" can
# be checked.
#
#   hack/corelines.sh [-v] [BASE [HEAD]]     BASE defaults to 7ca0b27 (round 3's end),
#                                           HEAD to HEAD; -v lists every commit
#
# The core is the non-test .go files (not *_test.go) under CORE below. A commit's
# change is `git log --numstat` restricted to those files; merges are left out, and
# what their resolutions changed (both sides edited the same lines) is the residue
# between the sum of the commits and the difference of the two counts.
#
# Each commit's class comes from hack/corelines.classes (its rules are written at its
# top); a commit not listed there takes the first "issue NN" its message names, and
# is "unclassified" otherwise. Like for like is BASE's count plus the net change of
# the classes that add no feature (LIKE below: issue 26's de-duplications, refactors
# and doc moves), set against BASE's count; a second figure adds the classes ALSO
# names (issue 26's commits that added behaviour beside their de-duplication).
# It needs bash (4 or later) and git, nothing else.
set -euo pipefail
[[ $0 == */* ]] && cd "${0%/*}"
cd "$(git rev-parse --show-toplevel)"

CORE=(pkg/events pkg/controller/leadership pkg/k8s pkg/controller/leaderelection
	pkg/controller/lifecycle pkg/controller/metrics pkg/termctx pkg/termrun pkg/fence
	pkg/integration)
LIKE=(26 refactor)
ALSO=(26-feature) # printed as a second like-for-like figure, with LIKE
CLASSES=hack/corelines.classes

verbose=0
if [[ ${1:-} == -v ]]; then
	verbose=1
	shift
fi
base=${1:-7ca0b27}
head=${2:-HEAD}
git rev-parse -q --verify "$base^{commit}" >/dev/null || { echo "corelines: no commit $base" >&2; exit 2; }
git rev-parse -q --verify "$head^{commit}" >/dev/null || { echo "corelines: no commit $head" >&2; exit 2; }

specs=()
for d in "${CORE[@]}"; do specs+=("$d/*.go"); done
specs+=(':(exclude)*_test.go')

# count REV prints "<files> <lines>" of the core at REV.
count() {
	local files=0 lines=0 n
	while IFS= read -r n; do
		files=$((files + 1))
		lines=$((lines + ${n##*:}))
	done < <(git grep -c -e '' "$1" -- "${specs[@]}")
	echo "$files $lines"
}

# classOf HASH SUBJECT prints the commit's class.
declare -A listed=()
while read -r h c _; do
	[[ -z $h || $h == \#* ]] && continue
	listed[$h]=$c
done <"$CLASSES"
classOf() {
	local h
	for h in "${!listed[@]}"; do
		if [[ $1 == "$h"* ]]; then
			echo "${listed[$h]}"
			return
		fi
	done
	if [[ $2 =~ [Ii]ssue\ ([0-9]+) ]]; then
		echo "${BASH_REMATCH[1]}"
	else
		echo unclassified
	fi
}

read -r bfiles blines < <(count "$base")
read -r hfiles hlines < <(count "$head")
echo "core: ${CORE[*]}"
echo "      non-test .go files, every line counted"
printf '%-12s %4d files %6d lines\n' "$(git rev-parse --short "$base")" "$bfiles" "$blines"
printf '%-12s %4d files %6d lines  (%+d)\n' "$(git rev-parse --short "$head")" "$hfiles" "$hlines" $((hlines - blines))
echo

declare -A add=() del=() num=()
sum=0
[[ $verbose == 1 ]] && printf '%-12s %-9s %6s %6s %6s  %s\n' class commit added removed net subject
flush() {
	[[ -z $commit ]] && return
	((a + d == 0)) && return
	local c
	c=$(classOf "$commit" "$subject")
	add[$c]=$((${add[$c]:-0} + a))
	del[$c]=$((${del[$c]:-0} + d))
	num[$c]=$((${num[$c]:-0} + 1))
	sum=$((sum + a - d))
	[[ $verbose == 1 ]] && printf '%-12s %-9s %6d %6d %+6d  %.90s\n' "$c" "$commit" "$a" "$d" $((a - d)) "$subject"
	return 0
}
commit='' subject='' a=0 d=0
while IFS= read -r line; do
	if [[ $line == @@* ]]; then
		flush
		line=${line#@@ }
		commit=${line%% *} subject=${line#* } a=0 d=0
	elif [[ $line =~ ^([0-9]+)$'\t'([0-9]+)$'\t'(.*)$ ]]; then
		a=$((a + BASH_REMATCH[1])) d=$((d + BASH_REMATCH[2]))
	fi
done < <(git log --no-merges --format='@@ %h %s' --numstat "$base..$head" -- "${specs[@]}")
flush
[[ $verbose == 1 ]] && echo

printf '%-12s %7s %7s %7s %7s  %s\n' class commits added removed net 'like for like'
like=0
order=()
for c in 25 26 26-feature 27 28 elector-fix refactor; do [[ -n ${num[$c]:-} ]] && order+=("$c"); done
for c in "${!num[@]}"; do [[ " ${order[*]} " == *" $c "* ]] || order+=("$c"); done
for c in "${order[@]}"; do
	l=no
	for k in "${LIKE[@]}"; do [[ $c == "$k" ]] && l=yes; done
	[[ $l == yes ]] && like=$((like + ${add[$c]} - ${del[$c]}))
	printf '%-12s %7d %7d %7d %+7d  %s\n' "$c" "${num[$c]}" "${add[$c]}" "${del[$c]}" $((${add[$c]} - ${del[$c]})) "$l"
done
printf '%-12s %31s %+7d  %s\n' merges '(resolutions: the residue)' $((hlines - blines - sum)) no
echo
# likeLine LABEL NET prints BASE's count plus NET, set against BASE's count.
likeLine() {
	local sign=+ abs=$2 permille
	(($2 < 0)) && sign=- abs=$((-$2))
	permille=$((1000 * abs / blines))
	printf '%s: %d + (%s%d) = %d lines, %s%d against %d (%s%d.%d%%)\n' "$1" "$blines" "$sign" "$abs" \
		$((blines + $2)) "$sign" "$abs" "$blines" "$sign" $((permille / 10)) $((permille % 10))
}
also=$like
for c in "${ALSO[@]}"; do also=$((also + ${add[$c]:-0} - ${del[$c]:-0})); done
likeLine "like for like (${LIKE[*]})" "$like"
likeLine "with ${ALSO[*]} too" "$also"
