/* A two-layer perceptron with one output (a device's score), trained with
 * Adam; forward and backward passes written out by hand. The parameters sit
 * in one array: w1[hid][in], b1[hid], w2[hid], b2. */
#ifndef HETMEM_RL_NET_H
#define HETMEM_RL_NET_H

#include <stdint.h>

typedef struct {
    int in, hid, np;
    double *p, *g, *m, *v; /* parameters, gradient, Adam moments [np] */
    long t;                /* Adam steps */
} hm__net_t;

/* Small random weights (seeded). 0 or -ENOMEM. */
int hm__net_init(hm__net_t *n, int in, int hid, uint64_t *rng);
void hm__net_free(hm__net_t *n);
/* Output for input x; the hidden activations go to h[hid] for backward. */
double hm__net_forward(const hm__net_t *n, const double *x, double *h);
/* Adds dout * d(output)/d(parameters) at input x to the gradient. */
void hm__net_backward(hm__net_t *n, const double *x, const double *h, double dout);
/* One Adam step descending the gradient, which is then cleared. */
void hm__net_step(hm__net_t *n, double lr);
/* Policy files: a text header "hetmem-rl-policy 1 IN HID" and the
 * parameters. Load fails with HM_EUSAGE when the shape differs. */
int hm__net_save(const hm__net_t *n, const char *path);
int hm__net_load(hm__net_t *n, const char *path);

#endif
