// C++ containers and new/delete under the interposer.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

int main()
{
    std::map<int, std::string> m;
    for (int i = 0; i < 20000; i++)
        m[i] = std::to_string(i * 3);
    std::vector<std::unique_ptr<std::vector<double>>> vs;
    for (int i = 0; i < 50; i++)
        vs.emplace_back(new std::vector<double>(20000 + i, 1.5));
    double s = 0;
    for (auto &v : vs)
        for (double x : *v)
            s += x;
    auto *arr = new double[1 << 20]();
    arr[5] = 2;
    s += arr[5];
    delete[] arr;
    std::printf("%zu %s %.1f\n", m.size(), m[19999].c_str(), s);
    return 0;
}
