// The translation unit that the test targets' shared precompiled header is
// built with (tests/CMakeLists.txt, dpopt_test_pch); it defines nothing.
