# Cross-compiling for 64-bit Arm with Debian's gcc-aarch64-linux-gnu and the
# arm64 -dev packages (dpkg --add-architecture arm64; see scripts/cross-deps.sh).
# Used by `make cross-aarch64`: compile and link only, nothing is run.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and headers of the target come from the multiarch folders; the
# build's programs (help2man, python3) from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
