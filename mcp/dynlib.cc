#include "mcp/dynlib.h"

#include <dlfcn.h>

#include <mutex>

namespace cordon::mcp {
namespace {

// Resolves every symbol of `api` from `soname`; on failure returns what is missing.
template <typename Api, typename Fill>
Result<const Api*> Load(const char* soname, const char* package, Fill fill) {
  static std::once_flag once;
  static Api api{};
  static std::string error;
  std::call_once(once, [&] {
    void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);  // kept for the life of the process
    if (lib == nullptr) {
      const char* why = ::dlerror();
      error = std::string("cannot load ") + soname + " (" + (why ? why : "unknown error") +
              "); install the Debian package " + package;
      return;
    }
    auto sym = [&](const char* name) -> void* {
      void* p = ::dlsym(lib, name);
      if (p == nullptr && error.empty()) error = std::string(soname) + " lacks " + name;
      return p;
    };
    fill(api, sym);
  });
  if (!error.empty()) return Fail(Code::kInternal, error);
  return &api;
}

template <typename T>
void Set(T*& slot, void* p) {
  slot = reinterpret_cast<T*>(p);
}

}  // namespace

Result<const MhdApi*> Mhd() {
  return Load<MhdApi>("libmicrohttpd.so.12", "libmicrohttpd12", [](MhdApi& a, auto sym) {
    Set(a.start_daemon, sym("MHD_start_daemon"));
    Set(a.stop_daemon, sym("MHD_stop_daemon"));
    Set(a.create_response_from_buffer, sym("MHD_create_response_from_buffer"));
    Set(a.create_response_from_callback, sym("MHD_create_response_from_callback"));
    Set(a.add_response_header, sym("MHD_add_response_header"));
    Set(a.queue_response, sym("MHD_queue_response"));
    Set(a.destroy_response, sym("MHD_destroy_response"));
    Set(a.lookup_connection_value, sym("MHD_lookup_connection_value"));
    Set(a.add_connection, sym("MHD_add_connection"));
  });
}

}  // namespace cordon::mcp
