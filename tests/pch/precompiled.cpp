// The translation unit that carries tests/pch/precompiled.h's precompiled form
// (CMakeLists.txt: cpinfer_test_pch); it defines nothing.
