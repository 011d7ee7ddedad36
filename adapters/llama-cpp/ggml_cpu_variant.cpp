// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Linked beside rollback.cpp when it is built against a llama.cpp whose ggml
// loads its CPU backend at run time (GGML_BACKEND_DL, as node-llama-cpp's
// prebuilt libraries are made; adapters/llama-cpp/prebuilt.py). Such a ggml
// has no backend until one is loaded (llama_model_load_from_file refuses:
// "no backends are loaded"), and rollback.cpp is the same source for both
// builds, so the loading happens here, before main, from the environment:
//
//   SSM_GGML_CPU_VARIANT=PATH  loads that one CPU variant (ggml_backend_load),
//                              e.g. the baseline libggml-cpu-x64.so;
//   SSM_GGML_BACKEND_DIR=DIR   otherwise, every backend in DIR, of which ggml
//                              keeps the CPU variant that scores best on this
//                              CPU (ggml_backend_load_all_from_path), the one
//                              a user of the package gets.
//
// include/ggml-backend.h declares both in the release the package ships.

#include "ggml-backend.h"

#include <cstdlib>

namespace {

struct CpuVariantLoader {
    CpuVariantLoader() {
        if (const char * variant = std::getenv("SSM_GGML_CPU_VARIANT")) {
            ggml_backend_load(variant);
        } else if (const char * folder = std::getenv("SSM_GGML_BACKEND_DIR")) {
            ggml_backend_load_all_from_path(folder);
        }
    }
};

const CpuVariantLoader loader;

}  // namespace
