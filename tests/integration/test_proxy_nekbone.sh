# The third-party proxy apps (bench/apps), Fortran: Nekbone builds through
# CMake natively and with hetmem-fort, both builds reduce every CG solve's
# residual by 1e-6 and print the same residuals (bench/apps/check.py), and
# `hetmem sim --json`, with no placement, reports its static arrays as
# objects: the main program's CG vectors (driver.f:13, x f r w p z c, lt =
# lx1^3 x lelt = 10^3 x 128 doubles each, sized by nekbone/SIZE whatever
# the run's size) and geometric factors (driver.f:14, g, 6 x lt doubles),
# each named by its symbol and the line that declares it, holding most of
# the run's traffic.
. "$HETMEM_SRC/tests/integration/proxy_lib.sh"
command -v gfortran >/dev/null || { echo "no gfortran: Nekbone is not built"; exit 77; }
# The test size: 16 elements of order 8.
proxy_build_check nekbone hetmem-fort "native and simulated runs reduce each residual by 1e-6, to the same values"

lt=$((10 * 10 * 10 * 128))
got=$(jq -r "[.objects[] | select(.bytes_allocated == $((lt * 8)) and (.name // \"\" | test(\"^[xfrwpzc]\\\\.[0-9]+\$\")))
        | \"\(.name | split(\".\")[0])@\(.source // \"-\" | split(\" \")[0])\"] | sort | join(\",\")" "$T/sim.json")
want="c@driver.f:13,f@driver.f:13,p@driver.f:13,r@driver.f:13,w@driver.f:13,x@driver.f:13,z@driver.f:13"
[ "$got" = "$want" ] && ok "the 7 CG vectors of $((lt * 8)) bytes: $got" || fail "CG vectors: '$got' (want '$want')"
g=$(jq -r "[.objects[] | select(.bytes_allocated == $((lt * 48)) and (.name // \"\" | startswith(\"g.\"))) |
        \"\(.source // \"-\" | split(\" \")[0]) \(.bytes_read)\"] | join(\",\")" "$T/sim.json")
[[ "$g" =~ ^driver\.f:14\ [1-9][0-9]*$ ]] && ok "geometric factors g: one object, read ($g)" || fail "g: '$g'"
pct=$(tracked_pct)
[ "$pct" -ge 80 ] && ok "$pct% of the traffic in objects" || fail "only $pct% of the traffic in objects"

done_tests
