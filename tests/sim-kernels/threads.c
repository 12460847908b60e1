/* A multi-threaded program: hetmem sim must refuse it. */
#include <pthread.h>
#include <stdio.h>

static void *work(void *arg) { return arg; }

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, work, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    puts("joined");
    return 0;
}
