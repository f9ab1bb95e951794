# Cross build for 64-bit ARM Linux with Debian's cross compiler (g++-aarch64-linux-gnu), run under
# qemu-user (qemu-aarch64): scripts/arm-test configures build-arm/ with this file. The target's
# libstdc++, libgomp and glibc come with the cross compiler (under /usr/aarch64-linux-gnu); the
# other libraries the library and its tests use are header-only and arch-independent (Eigen,
# nlohmann/json, CLI11, Boost headers in /usr/include, which the cross compiler searches last),
# {fmt} is used header-only (ATTNUM_FMT_HEADER_ONLY) and GoogleTest is built from Debian's
# sources (ATTNUM_GTEST_SOURCE): no multiarch arm64 packages are needed.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# A portable baseline (every ARMv8-A core: Graviton, Apple silicon under Linux, Ampere...).
# -Wno-psabi: GCC's note that std::pair<long double, ...> is passed as GCC 10 changed it (Boost's
# incomplete beta) concerns mixing objects of GCC < 10 with newer ones; everything here is GCC 12.
set(CMAKE_CXX_FLAGS_INIT "-march=armv8-a -Wno-psabi")
# Tests, test discovery and add_test run the aarch64 executables through qemu-user; the dynamic
# loader and libraries are found under the cross compiler's root.
set(ATTNUM_AARCH64_ROOT /usr/aarch64-linux-gnu)
find_program(ATTNUM_QEMU_AARCH64 qemu-aarch64)
if(ATTNUM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${ATTNUM_QEMU_AARCH64} -L ${ATTNUM_AARCH64_ROOT})
endif()
# Libraries and headers of the target come from the cross root first, then the host's
# arch-independent /usr (header-only packages and their CMake configs); programs are the host's.
set(CMAKE_FIND_ROOT_PATH ${ATTNUM_AARCH64_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
