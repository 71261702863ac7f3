// The headers most test sources include, compiled once per build into a precompiled header
// that every test executable reuses (CMakeLists.txt: cpinfer_test_pch). Parsing them took
// about 2 s of each test source's compile; a test must still include what it uses, since a
// build with -DCPINFER_TEST_PCH=OFF compiles it without them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
