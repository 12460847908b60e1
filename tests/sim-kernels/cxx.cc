// C++ allocations under hetmem sim: two std::vector members of one struct,
// new[], std::unique_ptr from std::make_unique, an over-aligned new[] and a
// nothrow new, each of its own size, each written whole and read whole.
// Prints the sum and whether the aligned array is 64-byte aligned.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <vector>

struct alignas(64) Cell {
    double v[8];
};

struct Mesh {
    std::vector<double> x;
    std::vector<double> y;
    explicit Mesh(size_t n)
        : x(n),
          y(2 * n)
    {
    }
};

template <class T> static double touch(T *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (T)(i & 7);
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)p[i];
    return s;
}

int main()
{
    const size_t n = 32768; // 256 KiB of doubles
    Mesh m(n);                                                   // x: 256 KiB, y: 512 KiB
    double *arr = new double[3 * n];                             // 768 KiB
    std::unique_ptr<int[]> up = std::make_unique<int[]>(8 * n);  // 1 MiB
    Cell *cells = new Cell[5 * n / 8];                           // 1.25 MiB, aligned new[]
    char *raw = new (std::nothrow) char[10 * n];                 // 320 KiB
    if (!raw)
        return 1;
    double s = touch(m.x.data(), m.x.size()) + touch(m.y.data(), m.y.size()) + touch(arr, 3 * n) +
               touch(up.get(), 8 * n) + touch(&cells[0].v[0], 5 * n) + touch(raw, 10 * n);
    std::printf("%.0f %d\n", s, (int)((uintptr_t)cells % 64 == 0));
    delete[] raw;
    delete[] cells;
    delete[] arr;
    return 0;
}
