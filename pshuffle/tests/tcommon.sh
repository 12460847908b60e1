# Shell helpers of the pshuffle tests, sourced by them.

# CPU seconds (user + system) used so far by process $1 and its descendants.
# A job's CPU time, unlike its wall time, does not grow with the load of a
# shared machine: limits on it hold on a busy CI runner too.
tree_cpu() {
  ps -e -o pid=,ppid=,times= | awk -v root="$1" '
    { parent[$1] = $2; t[$1] = $3 }
    END { for (p in parent) { q = p; n = 0
            while (q != root && (q in parent) && n++ < 64) q = parent[q]
            if (q == root) s += t[p] }
          print s + 0 }'
}
