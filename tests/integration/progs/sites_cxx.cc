// C++ allocation sites that hetmem sim, hetmem record and hetmem run must
// name alike, built natively or with hetmem-c++ (test_sites_agree.sh): a
// std::vector built in a function (its line and its caller's), a vector
// grown by push_back (every growth one site), new[] and a nothrow new[].
#include <cstdio>
#include <new>
#include <vector>

__attribute__((noinline)) static std::vector<double> filled(size_t n, double v)
{
    return std::vector<double>(n, v);
}

int main(int argc, char **)
{
    size_t n = (size_t(1) << 15) + size_t(argc) - 1;
    std::vector<double> v = filled(n, 1.0);
    std::vector<double> w;
    for (size_t i = 0; i < n; i++)
        w.push_back(double(i));
    double *x = new double[n]();
    double *y = new (std::nothrow) double[n];
    if (!y)
        return 1;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        y[i] = v[i] * w[i];
        s += x[i] + y[i];
    }
    std::printf("sum %.0f\n", s);
    delete[] x;
    delete[] y;
    return 0;
}
