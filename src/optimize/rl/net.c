/* The policy network: score = w2 . tanh(W1 x + b1) + b2. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../opt_int.h"
#include "net.h"

int hm__net_init(hm__net_t *n, int in, int hid, uint64_t *rng)
{
    memset(n, 0, sizeof *n);
    n->in = in;
    n->hid = hid;
    n->np = hid * in + hid + hid + 1;
    n->p = calloc((size_t)n->np, sizeof *n->p);
    n->g = calloc((size_t)n->np, sizeof *n->g);
    n->m = calloc((size_t)n->np, sizeof *n->m);
    n->v = calloc((size_t)n->np, sizeof *n->v);
    if (!n->p || !n->g || !n->m || !n->v) {
        hm__net_free(n);
        return -ENOMEM;
    }
    /* Xavier-uniform first layer; a small last layer, so that the first
     * policy is close to uniform and explores. */
    double a1 = sqrt(6.0 / (in + hid));
    for (int i = 0; i < hid * in; i++)
        n->p[i] = a1 * (2 * hm__opt_unif(rng) - 1);
    double *w2 = n->p + hid * in + hid;
    for (int j = 0; j < hid; j++)
        w2[j] = 0.1 * (2 * hm__opt_unif(rng) - 1);
    return 0;
}

void hm__net_free(hm__net_t *n)
{
    free(n->p);
    free(n->g);
    free(n->m);
    free(n->v);
    memset(n, 0, sizeof *n);
}

double hm__net_forward(const hm__net_t *n, const double *x, double *h)
{
    const double *w1 = n->p, *b1 = n->p + n->hid * n->in, *w2 = b1 + n->hid;
    double out = w2[n->hid];
    for (int j = 0; j < n->hid; j++) {
        double a = b1[j];
        for (int i = 0; i < n->in; i++)
            a += w1[j * n->in + i] * x[i];
        h[j] = tanh(a);
        out += w2[j] * h[j];
    }
    return out;
}

void hm__net_backward(hm__net_t *n, const double *x, const double *h, double dout)
{
    const double *w2 = n->p + n->hid * n->in + n->hid;
    double *gw1 = n->g, *gb1 = n->g + n->hid * n->in, *gw2 = gb1 + n->hid;
    gw2[n->hid] += dout;
    for (int j = 0; j < n->hid; j++) {
        gw2[j] += dout * h[j];
        double da = dout * w2[j] * (1 - h[j] * h[j]);
        gb1[j] += da;
        for (int i = 0; i < n->in; i++)
            gw1[j * n->in + i] += da * x[i];
    }
}

void hm__net_step(hm__net_t *n, double lr)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    n->t++;
    double c1 = 1 - pow(b1, (double)n->t), c2 = 1 - pow(b2, (double)n->t);
    for (int i = 0; i < n->np; i++) {
        double g = n->g[i];
        n->m[i] = b1 * n->m[i] + (1 - b1) * g;
        n->v[i] = b2 * n->v[i] + (1 - b2) * g * g;
        n->p[i] -= lr * (n->m[i] / c1) / (sqrt(n->v[i] / c2) + eps);
        n->g[i] = 0;
    }
}

int hm__net_save(const hm__net_t *n, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return hm__errf(-errno, "%s", path);
    fprintf(f, "hetmem-rl-policy 1 %d %d\n", n->in, n->hid);
    for (int i = 0; i < n->np; i++)
        fprintf(f, "%.17g\n", n->p[i]);
    if (fclose(f) != 0)
        return hm__errf(-errno, "%s", path);
    return 0;
}

int hm__net_load(hm__net_t *n, const char *path)
{
    int fd, rc = hm__open_input(path, &fd);
    if (rc)
        return rc;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return hm__errf(-errno, "%s", path);
    }
    int ver = 0, in = 0, hid = 0;
    if (fscanf(f, "hetmem-rl-policy %d %d %d", &ver, &in, &hid) != 3 || ver != 1) {
        rc = hm__errf(HM_EUSAGE, "%s: not a hetmem policy file", path);
        goto out;
    }
    if (in != n->in || hid != n->hid) {
        rc = hm__errf(HM_EUSAGE, "%s: policy of shape %dx%d, this build uses %dx%d", path, in, hid, n->in, n->hid);
        goto out;
    }
    for (int i = 0; i < n->np; i++)
        if (fscanf(f, "%lf", &n->p[i]) != 1 || !isfinite(n->p[i])) {
            rc = hm__errf(HM_EUSAGE, "%s: parameter %d missing or not finite", path, i);
            goto out;
        }
out:
    fclose(f);
    return rc;
}
