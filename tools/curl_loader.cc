#include "tools/curl_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

namespace cordon {

Result<const CurlApi*> Curl() {
  static std::once_flag once;
  static CurlApi api{};
  static std::string error;
  std::call_once(once, [] {
    constexpr const char* kSoname = "libcurl.so.4";
    void* lib = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);  // kept for the life of the process
    if (lib == nullptr) {
      const char* why = ::dlerror();
      error = std::string("cannot load ") + kSoname + " (" + (why ? why : "unknown error") +
              "); install the Debian package libcurl4";
      return;
    }
    auto sym = [&](auto*& slot, const char* name) {
      void* p = ::dlsym(lib, name);
      if (p == nullptr && error.empty()) error = std::string(kSoname) + " lacks " + name;
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
    };
    sym(api.global_init, "curl_global_init");
    sym(api.easy_init, "curl_easy_init");
    sym(api.easy_setopt, "curl_easy_setopt");
    sym(api.easy_perform, "curl_easy_perform");
    sym(api.easy_getinfo, "curl_easy_getinfo");
    sym(api.easy_cleanup, "curl_easy_cleanup");
    sym(api.easy_strerror, "curl_easy_strerror");
    sym(api.slist_append, "curl_slist_append");
    sym(api.slist_free_all, "curl_slist_free_all");
    sym(api.url, "curl_url");
    sym(api.url_cleanup, "curl_url_cleanup");
    sym(api.url_set, "curl_url_set");
    sym(api.url_get, "curl_url_get");
    sym(api.free, "curl_free");
    sym(api.version_info, "curl_version_info");
    if (error.empty()) api.global_init(CURL_GLOBAL_DEFAULT);
  });
  if (!error.empty()) return Fail(Code::kInternal, error);
  return &api;
}

}  // namespace cordon
