/* _exit where the runtime cannot finish normally.
 *   exitsig signal   two threads allocate tracked objects from many call
 *                    sites (each new site writes a spool record under the
 *                    runtime's lock) while the main thread loops in
 *                    malloc/free; a SIGALRM handler calls _exit(7) in the
 *                    middle of it.
 *   exitsig fork N   the same threads run while the main thread forks N
 *                    children that each _exit(3) at once; prints
 *                    "children N" when all exited with 3. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;
static _Atomic unsigned made; /* tracked objects the workers allocated */

/* Distinct call sites: the site id hashes the return addresses. */
#define SITE(k) __attribute__((noinline)) static void *site##k(size_t n) { void *p = malloc(n); __asm__ volatile("" ::: "memory"); return p; }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
static void *(*const sites[])(size_t) = {site0, site1, site2, site3, site4, site5, site6, site7};

static void *worker(void *arg)
{
    unsigned k = (unsigned)(size_t)arg;
    while (!stop) {
        void *p = sites[k++ % 8]((64 << 10) + (k % 16) * 4096);
        if (p) {
            memset(p, 1, 4096);
            made++;
        }
        free(p);
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    _exit(7);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    pthread_t th[2];
    for (size_t i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    if (!strcmp(argv[1], "signal")) {
        signal(SIGALRM, on_alarm);
        /* The alarm is armed once the workers have allocated (a loaded
         * machine may not run them in the first 150 ms), and fires in the
         * middle of their allocations. */
        for (unsigned i = 0; made < 64; i++) {
            void *p = malloc(16 + i % 512);
            free(p);
        }
        struct itimerval it = {{0, 0}, {0, 150000}};
        setitimer(ITIMER_REAL, &it, NULL);
        for (unsigned i = 0;; i++) {
            void *p = malloc(16 + i % 512);
            free(p);
        }
    }
    int n = argc > 2 ? atoi(argv[2]) : 20, good = 0;
    for (int i = 0; i < n; i++) {
        pid_t c = fork();
        if (c == 0)
            _exit(3);
        int st = 0;
        if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 3)
            good++;
    }
    stop = 1;
    for (size_t i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    printf("children %d\n", good);
    return 0;
}
