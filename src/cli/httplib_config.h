// cpp-httplib, configured as Debian's libcpp-httplib.so was built. That package ships a
// header of declarations only; its pkg-config Cflags define the macros below, and the
// layouts of httplib::Request and httplib::Client depend on them, so every file that
// includes httplib must agree with the library (link it with -lcpp-httplib).
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif

#include <httplib.h>
