// libcurl, loaded with dlopen when first needed (read_url here, the MCP HTTP client in mcp/).
// Linked normally it brings some 30 shared libraries (TLS, Kerberos, LDAP, IDN...) that the
// dynamic loader maps and relocates at every start, about 5 ms: the whole cost of `cordon exec`
// over bwrap, paid by commands that never speak HTTP.
#pragma once

#include <curl/curl.h>

#include "core/error.h"

namespace cordon {

struct CurlApi {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL* curl, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* curl);
  CURLcode (*easy_getinfo)(CURL* curl, CURLINFO info, ...);
  void (*easy_cleanup)(CURL* curl);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* text);
  void (*slist_free_all)(curl_slist* list);
  // The URL parser (read_url checks a redirect's host as curl itself would read it).
  CURLU* (*url)();
  void (*url_cleanup)(CURLU* handle);
  CURLUcode (*url_set)(CURLU* handle, CURLUPart what, const char* part, unsigned int flags);
  CURLUcode (*url_get)(const CURLU* handle, CURLUPart what, char** part, unsigned int flags);
  void (*free)(void* p);
  curl_version_info_data* (*version_info)(CURLversion age);  // `cordon doctor`
};

// Loaded once (curl_global_init done); a missing library is an error naming the package.
Result<const CurlApi*> Curl();

}  // namespace cordon
