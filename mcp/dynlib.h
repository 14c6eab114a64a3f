// libmicrohttpd (and, in tools/curl_loader.h, libcurl), loaded with dlopen when first needed.
// Linked normally they bring some 30 shared libraries (TLS, Kerberos, LDAP, IDN...) that the
// dynamic loader maps and relocates at every start, about 5 ms: the whole cost of `cordon exec`
// over bwrap, paid by commands that never speak HTTP (exec, call, wrap, stdio serve). Only the HTTP
// client and `serve --http` load them.
#pragma once

#include <microhttpd.h>

#include "core/error.h"
#include "tools/curl_loader.h"  // CurlApi, Curl(): shared with read_url

namespace cordon::mcp {

struct MhdApi {
  MHD_Daemon* (*start_daemon)(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
                              void* apc_cls, MHD_AccessHandlerCallback dh, void* dh_cls, ...);
  void (*stop_daemon)(MHD_Daemon* daemon);
  MHD_Response* (*create_response_from_buffer)(size_t size, void* buffer,
                                               MHD_ResponseMemoryMode mode);
  MHD_Response* (*create_response_from_callback)(uint64_t size, size_t block_size,
                                                 MHD_ContentReaderCallback crc, void* crc_cls,
                                                 MHD_ContentReaderFreeCallback crfc);
  MHD_Result (*add_response_header)(MHD_Response* response, const char* header,
                                    const char* content);
  MHD_Result (*queue_response)(MHD_Connection* connection, unsigned int status_code,
                               MHD_Response* response);
  void (*destroy_response)(MHD_Response* response);
  const char* (*lookup_connection_value)(MHD_Connection* connection, MHD_ValueKind kind,
                                         const char* key);
  MHD_Result (*add_connection)(MHD_Daemon* daemon, MHD_socket client_socket,
                               const struct sockaddr* addr, socklen_t addrlen);
};

// Loaded once; a missing library is an error naming the package.
Result<const MhdApi*> Mhd();

}  // namespace cordon::mcp
