// Sanitizer defaults for the MPI rank programs (dpopt-dda-worker and
// dpopt-dda-worker-testing); compiled into them directly (not through the
// library, so the linker keeps the symbol). Only sanitizer builds
// (scripts/sanitize.sh) see it; the normal build compiles an empty file.
//
// Open MPI (Debian's libopenmpi3) keeps process-lifetime allocations that it
// never frees at MPI_Finalize, and unloads its plugins (mca_*.so) there. Its
// libraries are built without frame pointers, so the fast malloc unwinder
// stops inside them, at frames of unloaded plugins that no suppression can
// name. The slow (DWARF) unwinder records the whole stack at allocation
// time, so every such leak shows libmpi / libopen-rte / libopen-pal (or the
// libevent loop of Open MPI's progress thread) and is matched by the
// suppressions in tests/sanitizers/lsan.supp, which name only those
// libraries; a leak in dpopt code is still reported. ASAN_OPTIONS from the
// environment overrides this default if it sets the same flag.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
extern "C" const char* __asan_default_options() {
  return "fast_unwind_on_malloc=0";
}
#endif
#endif
