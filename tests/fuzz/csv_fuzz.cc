// libFuzzer target: the CSV parser of dataset import.
#include "tests/fuzz/dataset_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dpopt::fuzz::FuzzDatasetParser(dpopt::storage::DatasetFormat::kCsv, data,
                                 size);
  return 0;
}
