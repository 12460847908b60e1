#!/usr/bin/env bash
# libhetmem.so exports exactly the public API: every function declared in
# include/hetmem/*.h (other than static inline helpers and the weak runtime
# entry points hm_rt_*, which the preload and instrumentation runtimes
# define), and nothing else; its soname carries the major version.
set -u
LIB="$HETMEM_BUILD/lib/libhetmem.so"
[ -e "$LIB" ] || { echo "FAIL: $LIB not built"; exit 1; }
command -v nm > /dev/null && command -v readelf > /dev/null || { echo "skip: binutils not installed"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

major=$(cut -d. -f1 "$HETMEM_SRC/VERSION")
soname=$(readelf -d "$LIB" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = "libhetmem.so.$major" ] || { echo "FAIL: soname '$soname', expected libhetmem.so.$major"; exit 1; }

for h in "$HETMEM_SRC"/include/hetmem/*.h; do
  cc -E -P -I"$HETMEM_SRC/include" "$h" || { echo "FAIL: $h does not preprocess on its own"; exit 1; }
done > "$W/headers.i"
python3 - "$W/headers.i" > "$W/declared" << 'EOF'
import re, sys
text = open(sys.argv[1]).read()
names = set()
for m in re.finditer(r"\b(hm_[a-z0-9_]+)\s*\(", text):
    name = m.group(1)
    # The declaration this name is in: from the previous ';', '{' or '}' on.
    start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
    end = text.find(";", m.end())
    decl = text[start:end if end >= 0 else len(text)]
    if name.startswith("hm__") or name.startswith("hm_rt_"):
        continue
    if re.search(r"\bstatic\b", decl[: m.start() - start]):
        continue
    if "typedef" in decl or "weak" in decl:
        continue
    names.add(name)
print("\n".join(sorted(names)))
EOF
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVWiu]$/ {sub(/@.*/, "", $3); print $3}' | sort -u > "$W/exported"

fails=0
missing=$(comm -23 "$W/declared" "$W/exported")
extra=$(comm -13 "$W/declared" "$W/exported")
[ -z "$missing" ] || { echo "FAIL: declared in include/hetmem but not exported:"; echo "$missing"; fails=1; }
[ -z "$extra" ] || { echo "FAIL: exported but not declared in include/hetmem:"; echo "$extra"; fails=1; }
[ "$(wc -l < "$W/declared")" -gt 20 ] || { echo "FAIL: only $(wc -l < "$W/declared") declarations found"; fails=1; }
[ $fails = 0 ] || exit 1
echo "ok: $(wc -l < "$W/exported") functions exported, all declared in include/hetmem; soname $soname"
