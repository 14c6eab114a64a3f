// AuditSessionDiff (audit/diff.h): a session's changed files from its log, with the before
// content from the store or HEAD and the after content from the store or the disk, each proven
// by its hash before it is used.
#include "audit/diff.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "audit/show.h"
#include "core/before_images.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/line_diff.h"
#include "core/unique_fd.h"

namespace cordon {
namespace {

bool IsHexId(const std::string& s) {
  return (s.size() == 40 || s.size() == 64) &&
         s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string StrOr(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One changed file as the log gives it.
struct Change {
  std::uint64_t line = 0;
  std::string record;  // file_write or process
  std::string tool, op, path, from;
  std::optional<std::uint64_t> call;
  std::optional<std::string> sha_before, sha_after;
  std::optional<std::uint64_t> bytes_before, bytes_after;
  bool created = false;  // no before: a new file
  bool deleted = false;  // no after
  bool escaped = false;  // path_escaped: the name is not the file's bytes
};

// --- git cat-file --batch: the blobs at HEAD -------------------------------------------------

std::string FindGit(const std::string& path_list) {
  for (std::size_t at = 0; at <= path_list.size();) {
    std::size_t colon = path_list.find(':', at);
    if (colon == std::string::npos) colon = path_list.size();
    const std::string dir = path_list.substr(at, colon - at);
    if (!dir.empty() && dir[0] == '/') {
      const std::string git = dir + "/git";
      if (::access(git.c_str(), X_OK) == 0) return git;
    }
    at = colon + 1;
  }
  return {};
}

struct HeadBlobs {
  std::map<std::string, std::string> blobs;     // path -> content (a blob of at most the cap)
  std::map<std::string, std::string> problems;  // path -> why not (missing, too large, ...)
  std::string error;                            // git itself could not be run or failed
};

// Reads `<head>:<path>` for each path with one `git cat-file --batch`, run on `workspace` with no
// global or system configuration, core.fsmonitor off, replace refs ignored, and the search for a
// repository stopped at the workspace (GIT_CEILING_DIRECTORIES). Reads and writes are
// interleaved (poll), so neither pipe can stall the other.
HeadBlobs ReadHeadBlobs(const std::string& git, const std::string& workspace,
                        const std::string& head, const std::vector<std::string>& paths,
                        std::uint64_t max_bytes) {
  HeadBlobs out;
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  UniqueFd in_r(in_pipe[0]), in_w(in_pipe[1]);
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_r.get(), 0);
  posix_spawn_file_actions_adddup2(&fa, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, devnull.get(), 2);
  const std::string parent = workspace.substr(0, workspace.find_last_of('/'));
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C",
                                  "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
                                  "GIT_NO_REPLACE_OBJECTS=1", "GIT_OPTIONAL_LOCKS=0",
                                  "GIT_TERMINAL_PROMPT=0",
                                  // A partial clone with objects removed must not fetch them
                                  // from its remote with the auditor's credentials.
                                  "GIT_NO_LAZY_FETCH=1", "GIT_PROTOCOL_FROM_USER=0",
                                  "GIT_CEILING_DIRECTORIES=" + (parent.empty() ? "/" : parent)};
  std::vector<std::string> argv = {
      git,        "-c",     "core.fsmonitor=false", "-c", "protocol.allow=never", "-C", workspace,
      "cat-file", "--batch"};
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, git.c_str(), &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    out.error = "cannot run " + git + ": " + std::strerror(rc);
    return out;
  }
  in_r.Reset();
  out_w.Reset();
  // A git that exits early would raise SIGPIPE on the next write: blocked on this thread while
  // it writes, and a pending one discarded before the mask is restored.
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);
  std::string request;
  for (const auto& p : paths) request += head + ":" + p + "\n";
  std::size_t sent = 0;
  if (request.empty()) in_w.Reset();
  // The reply, parsed as it arrives: a header line, then (for an object) its bytes and "\n".
  std::string buf;
  std::size_t next = 0;         // the path the next header answers
  std::uint64_t body_left = 0;  // bytes of the current object still to come (+1: its "\n")
  bool in_body = false, keep = false;
  std::string body;
  auto parse = [&]() {
    for (;;) {
      if (in_body) {
        const std::size_t take =
            static_cast<std::size_t>(std::min<std::uint64_t>(body_left, buf.size()));
        if (keep) body.append(buf, 0, take);
        buf.erase(0, take);
        body_left -= take;
        if (body_left > 0) return;
        in_body = false;
        if (keep) {
          body.pop_back();  // the "\n" after the object
          out.blobs[paths[next]] = std::move(body);
        }
        body.clear();
        ++next;
        continue;
      }
      const std::size_t nl = buf.find('\n');
      if (nl == std::string::npos || next >= paths.size()) return;
      const std::string header = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      // "<oid> <type> <size>", or "<object> missing" / "<object> ambiguous", where <object> is
      // the request ("HEAD:a path", which may hold spaces): the suffix decides first, then the
      // first field must be an object id.
      const std::size_t s1 = header.find(' '), s2 = header.rfind(' ');
      const bool hex_oid =
          (s1 == 40 || s1 == 64) && header.find_first_not_of("0123456789abcdef") == s1;
      if (s1 == std::string::npos || s1 == s2 || header.ends_with(" missing") ||
          header.ends_with(" ambiguous") || !hex_oid) {
        out.problems[paths[next]] = "not at HEAD (" + header.substr(header.rfind(' ') + 1) + ")";
        ++next;
        continue;
      }
      const std::string type = header.substr(s1 + 1, s2 - s1 - 1);
      const std::uint64_t size = std::strtoull(header.c_str() + s2 + 1, nullptr, 10);
      keep = type == "blob" && size <= max_bytes;
      if (type != "blob") out.problems[paths[next]] = "a " + type + " at HEAD, not a file";
      if (type == "blob" && !keep) {
        out.problems[paths[next]] = "larger than " + std::to_string(max_bytes) + " bytes at HEAD";
      }
      body_left = size + 1;
      in_body = true;
    }
  };
  char chunk[65536];
  bool eof = false;
  while (!eof) {
    pollfd fds[2] = {{out_r.get(), POLLIN, 0}, {in_w.valid() ? in_w.get() : -1, POLLOUT, 0}};
    const int ready = ::poll(fds, 2, 30000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      out.error = "git cat-file did not answer";
      break;
    }
    if (in_w.valid() && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      const ssize_t w = ::write(in_w.get(), request.data() + sent, request.size() - sent);
      if (w > 0) sent += static_cast<std::size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) sent = request.size();
      if (sent == request.size()) in_w.Reset();  // EOF: git answers the rest, then exits
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t r = ::read(out_r.get(), chunk, sizeof chunk);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        eof = true;
      } else {
        buf.append(chunk, static_cast<std::size_t>(r));
        parse();
      }
    }
  }
  in_w.Reset();
  const timespec no_wait{};
  while (::sigtimedwait(&pipe_set, nullptr, &no_wait) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (!eof) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (out.error.empty() && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    out.error = "git cat-file failed (not a repository git will read, or " + head +
                " is not a commit here)";
  }
  if (!out.error.empty()) out.blobs.clear();
  return out;
}

// --- the changes of one session ----------------------------------------------------------------

void FromFileWrite(const Json& r, std::uint64_t line, std::vector<Change>& out) {
  if (StrOr(r, "status") != "written") return;
  Change c;
  c.line = line;
  c.record = "file_write";
  c.tool = StrOr(r, "tool");
  c.op = StrOr(r, "op");
  c.path = StrOr(r, "path");
  if (r.contains("call") && r["call"].is_number_unsigned()) c.call = r["call"].get<std::uint64_t>();
  if (r.contains("sha256_before") && r["sha256_before"].is_string()) {
    c.sha_before = r["sha256_before"].get<std::string>();
  }
  if (r.contains("sha256_after") && r["sha256_after"].is_string()) {
    c.sha_after = r["sha256_after"].get<std::string>();
  }
  if (r.contains("bytes_before") && r["bytes_before"].is_number_unsigned())
    c.bytes_before = r["bytes_before"].get<std::uint64_t>();
  if (r.contains("bytes_after") && r["bytes_after"].is_number_unsigned())
    c.bytes_after = r["bytes_after"].get<std::uint64_t>();
  c.created = !c.sha_before && c.op == "create";
  if (c.created) c.bytes_before.reset();
  out.push_back(std::move(c));
}

// Where each path stands after the changes a call's record reported (an MCP server's commits,
// in tool_finished): the server's process record, at its end, repeats them in its total.
struct Reported {
  std::optional<std::string> sha_after;
  bool deleted = false;
};
using ReportedByPath = std::map<std::string, Reported>;

// The changes of a process record, or of a tool_finished that carries an MCP server's commits.
// A process record's entry that a call already reported (the path as it left it) is skipped.
void FromProcess(const Json& r, std::uint64_t line, std::vector<Change>& out,
                 ReportedByPath& reported) {
  auto it = r.find("changes");
  if (it == r.end() || !it->is_object() || !it->contains("entries") || !(*it)["entries"].is_array())
    return;
  const bool per_call = StrOr(r, "type") == "tool_finished";
  std::string argv0;
  if (r.contains("argv") && r["argv"].is_array() && !r["argv"].empty() && r["argv"][0].is_string())
    argv0 = r["argv"][0].get<std::string>();
  if (per_call) argv0 = StrOr(r, "server");
  for (const Json& e : (*it)["entries"]) {
    if (!e.is_object() || StrOr(e, "type") != "file") continue;
    const std::string kind = StrOr(e, "kind");
    if (kind != "created" && kind != "modified" && kind != "deleted" && kind != "renamed") continue;
    if (kind == "renamed" && !(e.contains("content_changed") && e["content_changed"] == Json(true)))
      continue;
    Change c;
    c.line = line;
    c.record = "process";
    c.tool = StrOr(r, "tool");
    if (r.contains("call") && r["call"].is_number_unsigned())
      c.call = r["call"].get<std::uint64_t>();
    c.op = argv0.empty() ? kind : kind + " by " + argv0;
    c.path = StrOr(e, "path");
    c.from = StrOr(e, "from");
    if (e.contains("sha256_before") && e["sha256_before"].is_string())
      c.sha_before = e["sha256_before"].get<std::string>();
    if (e.contains("sha256_after") && e["sha256_after"].is_string())
      c.sha_after = e["sha256_after"].get<std::string>();
    if (e.contains("bytes_before") && e["bytes_before"].is_number_unsigned())
      c.bytes_before = e["bytes_before"].get<std::uint64_t>();
    if (e.contains("bytes_after") && e["bytes_after"].is_number_unsigned())
      c.bytes_after = e["bytes_after"].get<std::uint64_t>();
    c.created = kind == "created";
    c.deleted = kind == "deleted";
    c.escaped = e.contains("path_escaped") && e["path_escaped"] == Json(true);
    if (per_call) {
      reported[c.path] = {c.sha_after, c.deleted};
    } else if (auto at = reported.find(c.path); at != reported.end() &&
                                                at->second.deleted == c.deleted &&
                                                at->second.sha_after == c.sha_after) {
      continue;
    }
    out.push_back(std::move(c));
  }
}

// A path the workspace holds (relative, a name's real bytes), which git and the disk can be
// asked about.
bool InWorkspace(const Change& c) {
  return !c.escaped && !c.path.empty() && c.path[0] != '/' &&
         c.path.find('\n') == std::string::npos;
}

Json Side(const std::string& source, bool verified, const std::string& note = "") {
  Json j = {{"source", source}, {"verified", verified}};
  if (!note.empty()) j["note"] = note;
  return j;
}

}  // namespace

Result<Json> AuditSessionDiff(const std::string& log_path, const std::string& session,
                              const AuditDiffOptions& options) {
  if (session.empty()) {
    return Fail(Code::kInvalidInput, "--session: give a session id or a prefix of one");
  }
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return SysFail(Code::kNotFound, "open", log_path);
  std::vector<std::pair<std::uint64_t, Json>> records;
  std::vector<std::string> sessions;
  std::set<std::string> seen, matches;
  std::uint64_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const std::string id = StrOr(j, "session");
    if (id.empty()) continue;
    if (seen.insert(id).second) sessions.push_back(id);
    if (id.rfind(session, 0) == 0) {
      matches.insert(id);
      records.emplace_back(n, std::move(j));
    }
  }
  if (matches.empty()) {
    std::string known;
    for (std::size_t i = 0; i < sessions.size() && i < 20; ++i) {
      known += (known.empty() ? "" : ", ") + sessions[i];
    }
    if (sessions.size() > 20) known += " and " + std::to_string(sessions.size() - 20) + " more";
    return Fail(Code::kNotFound, "no session in " + log_path + " starts with \"" + session +
                                     "\"; its sessions: " + (known.empty() ? "none" : known));
  }
  if (matches.size() > 1) {
    std::string all;
    for (const auto& s : matches) all += (all.empty() ? "" : ", ") + s;
    return Fail(Code::kInvalidInput,
                "--session " + session + " matches several sessions: " + all + "; give more of it");
  }
  const std::string id = *matches.begin();
  std::string workspace, head;
  std::vector<Change> changes;
  ReportedByPath reported;
  Json started = Json::object(), finished = Json::object();
  for (const auto& [line, r] : records) {
    const std::string type = StrOr(r, "type");
    if (type == "session_finished") finished = r;
    if (type == "session_started") {
      started = r;
      workspace = StrOr(r, "workspace");
      if (r.contains("git") && r["git"].is_object()) head = StrOr(r["git"], "head");
    } else if (type == "file_write") {
      FromFileWrite(r, line, changes);
    } else if (type == "process" || type == "tool_finished") {
      FromProcess(r, line, changes, reported);
    }
  }
  if (!IsHexId(head)) head.clear();
  const Redactor* redactor = options.redactor;
  Json about;
  std::string withheld;
  if (options.redactor_for) {
    auto r = options.redactor_for(started, finished, about);
    if (r) {
      redactor = *r;
    } else {
      redactor = nullptr;
      withheld = r.error().message;
    }
  }

  // The before side from the store first; what it cannot give, from HEAD.
  std::vector<std::optional<std::string>> before(changes.size()), after(changes.size());
  std::vector<Json> before_side(changes.size()), after_side(changes.size());
  std::vector<std::string> store_note(changes.size());
  std::vector<std::string> want_head;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const Change& c = changes[i];
    if (c.created) {
      before[i] = std::string();
      before_side[i] = Side("new_file", true);
      continue;
    }
    if (c.sha_before && !options.store_dir.empty()) {
      auto img = ReadBeforeImage(options.store_dir, *c.sha_before, options.max_file_bytes);
      if (img) {
        before[i] = std::move(*img);
        before_side[i] = Side("store", true);
        continue;
      }
      store_note[i] = img.error().code == Code::kNotFound ? "not in the store"
                      : img.error().code == Code::kConflict
                          ? "the store's copy does not hash to sha256_before (changed after it "
                            "was stored): not used"
                          : "store: " + img.error().message;
    }
    if (!head.empty() && InWorkspace(c)) want_head.push_back(c.path);
  }
  HeadBlobs blobs;
  const std::string git = options.git_path.empty() ? "" : FindGit(options.git_path);
  if (!want_head.empty() && !workspace.empty()) {
    if (git.empty()) {
      blobs.error = "git not found in " + options.git_path;
    } else {
      blobs = ReadHeadBlobs(git, workspace, head, want_head, options.max_file_bytes);
    }
  }
  auto ws = workspace.empty() ? Result<Workspace>(Fail(Code::kNotFound, "no workspace recorded"))
                              : Workspace::Open(workspace);
  Json counts_before = {
      {"store", 0}, {"git_head", 0}, {"git_head_unverified", 0}, {"new_file", 0}, {"none", 0}};
  Json files = Json::array();
  std::size_t diffs = 0;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const Change& c = changes[i];
    if (!before[i]) {
      std::string note = store_note[i];
      auto add = [&note](const std::string& s) { note += (note.empty() ? "" : "; ") + s; };
      if (options.store_dir.empty() && c.sha_before) add("no store");
      if (!c.sha_before && !c.created) add("no sha256_before recorded");
      if (head.empty()) {
        add("no git HEAD recorded");
      } else if (!InWorkspace(c)) {
        add("HEAD: not a workspace path");
      } else if (!blobs.error.empty()) {
        add("HEAD: " + blobs.error);
      } else if (auto b = blobs.blobs.find(c.path); b != blobs.blobs.end()) {
        if (!c.sha_before) {
          before[i] = b->second;
          before_side[i] = Side("git_head", false, "HEAD, unverified: no sha256_before to check");
        } else if (Sha256Hex(b->second) == *c.sha_before) {
          before[i] = b->second;
          before_side[i] = Side("git_head", true);
        } else {
          add("HEAD's blob does not hash to sha256_before (the file changed after HEAD)");
        }
      } else if (auto p = blobs.problems.find(c.path); p != blobs.problems.end()) {
        add("HEAD: " + p->second);
      }
      if (!before[i]) before_side[i] = Side("none", false, note);
    }
    const std::string bsrc = before_side[i]["source"].get<std::string>();
    const std::string key = bsrc == "git_head" && !before_side[i]["verified"].get<bool>()
                                ? "git_head_unverified"
                                : bsrc;
    counts_before[key] = counts_before[key].get<int>() + 1;
    // The after side: the store (a later change's before), else the disk, when it hashes.
    if (c.deleted) {
      after[i] = std::string();
      after_side[i] = Side("deleted", true);
    } else if (!c.sha_after) {
      after_side[i] = Side("none", false, "no sha256_after recorded");
    } else {
      std::string note;
      if (!options.store_dir.empty()) {
        auto img = ReadBeforeImage(options.store_dir, *c.sha_after, options.max_file_bytes);
        if (img) {
          after[i] = std::move(*img);
          after_side[i] = Side("store", true);
        }
      }
      if (!after[i]) {
        if (!InWorkspace(c)) {
          note = "not a workspace path";
        } else if (!ws) {
          note = "workspace: " + ws.error().message;
        } else {
          // openat2 beneath the workspace, no symlink followed anywhere, a regular file only.
          auto fc = ws->ReadRegular(c.path, options.max_file_bytes);
          if (!fc) {
            note = "on disk: " + fc.error().message;
          } else if (Sha256Hex(fc->data) != *c.sha_after) {
            note = "the file on disk does not hash to sha256_after (changed since)";
          } else {
            after[i] = std::move(fc->data);
            after_side[i] = Side("disk", true);
          }
        }
        if (!after[i]) after_side[i] = Side("none", false, note);
      }
    }
    Json f = {{"line", c.line},
              {"record", c.record},
              {"tool", c.tool},
              {"op", c.op},
              {"path", c.path},
              {"sha256_before", c.sha_before ? Json(*c.sha_before) : Json(nullptr)},
              {"sha256_after", c.sha_after ? Json(*c.sha_after) : Json(nullptr)},
              {"before", before_side[i]},
              {"after", after_side[i]}};
    if (c.call) f["call"] = *c.call;
    if (!c.from.empty()) f["from"] = c.from;
    if (c.bytes_before) f["bytes_before"] = *c.bytes_before;
    if (c.bytes_after) f["bytes_after"] = *c.bytes_after;
    if (!withheld.empty()) {
      f["withheld"] = true;
    } else if (before[i] && after[i]) {
      if (before[i]->find('\0') != std::string::npos || after[i]->find('\0') != std::string::npos) {
        f["binary"] = true;
      } else {
        const std::string a_label =
            c.created ? "/dev/null" : "a/" + (c.from.empty() ? c.path : c.from);
        const std::string b_label = c.deleted ? "/dev/null" : "b/" + c.path;
        // Each side redacted whole first: a secret spanning lines (a private key's body) is
        // matched where its first line is, which a hunk's context may leave out; the diff is
        // redacted again for what only its form shows.
        std::string a_text = *before[i], b_text = *after[i];
        std::size_t redactions = 0;
        if (redactor != nullptr) {
          redactions += redactor->Redact(a_text);
          redactions += redactor->Redact(b_text);
        }
        std::string d = UnifiedDiff(a_text, b_text, a_label, b_label, {.context = options.context});
        if (redactor != nullptr) redactions += redactor->Redact(d);
        f["diff"] = std::move(d);
        if (redactions > 0) f["redactions"] = redactions;
        ++diffs;
      }
    }
    files.push_back(std::move(f));
  }
  Json out = {{"session", id},
              {"workspace", workspace},
              {"git_head", head.empty() ? Json(nullptr) : Json(head)},
              {"files", std::move(files)},
              {"counts", {{"files", changes.size()}, {"diffs", diffs}, {"before", counts_before}}}};
  if (!about.is_null()) out["redaction"] = std::move(about);
  if (!withheld.empty()) out["withheld"] = withheld;
  return out;
}

namespace {

// Control characters (but tab and newline) as \xHH: a file's escape sequences never reach the
// auditor's terminal.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    if ((ch < 0x20 && ch != '\t' && ch != '\n') || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return TerminalSafe(out);  // C1 controls and bidi overrides too
}

std::string SideText(const Json& side) {
  const std::string src = side.value("source", "none");
  std::string t;
  if (src == "store") t = "store, verified";
  if (src == "disk") t = "disk, verified";
  if (src == "new_file") t = "new file";
  if (src == "deleted") t = "deleted";
  if (src == "git_head") t = side.value("verified", false) ? "HEAD, verified" : "HEAD, unverified";
  if (src == "none") t = "HASHES ONLY";
  if (side.contains("note") && src != "git_head") t += ": " + side.value("note", "");
  return t;
}

}  // namespace

std::string AuditSessionDiffText(const Json& diff) {
  std::string out;
  const Json& counts = diff["counts"];
  const Json& b = counts["before"];
  out += "# session " + diff.value("session", "") + ", workspace " +
         Printable(diff.value("workspace", "")) + "\n";
  out += "# " + std::to_string(counts.value("files", 0)) + " changed file(s), " +
         std::to_string(counts.value("diffs", 0)) + " diff(s); before from the store " +
         std::to_string(b.value("store", 0)) + ", HEAD " + std::to_string(b.value("git_head", 0)) +
         ", HEAD unverified " + std::to_string(b.value("git_head_unverified", 0)) + ", new files " +
         std::to_string(b.value("new_file", 0)) + ", hashes only " +
         std::to_string(b.value("none", 0)) + "\n";
  if (diff.contains("redaction") && diff["redaction"].is_object()) {
    for (const auto& [what, said] : diff["redaction"].items()) {
      out += "# redaction, " + what + ": " +
             Printable(said.is_string() ? said.get<std::string>() : said.dump()) + "\n";
    }
  }
  if (diff.contains("withheld")) {
    out += "# NO DIFF SHOWN: " + Printable(diff.value("withheld", "")) + "\n";
  }
  for (const Json& f : diff["files"]) {
    auto hash = [&f](const char* key) {
      return f[key].is_string() ? f[key].get<std::string>() : std::string("none");
    };
    out += "\n== " + Printable(f.value("path", ""));
    if (f.contains("from")) out += " (from " + Printable(f.value("from", "")) + ")";
    out += "  [" + f.value("record", "") + " line " + std::to_string(f.value("line", 0)) + ", " +
           Printable(f.value("tool", "")) + " " + Printable(f.value("op", "")) + "]\n";
    out += "   before sha256 " + hash("sha256_before") + "  (" + Printable(SideText(f["before"])) +
           ")\n";
    out += "   after  sha256 " + hash("sha256_after") + "  (" + Printable(SideText(f["after"])) +
           ")\n";
    if (f.contains("diff")) {
      out += Printable(f["diff"].get<std::string>());
    } else if (f.value("withheld", false)) {
      out += "   diff withheld (see above)\n";
    } else if (f.value("binary", false)) {
      out += "   binary files differ\n";
    } else {
      out += "   no diff: the before or after content is not available with a proven hash\n";
    }
  }
  return out;
}

}  // namespace cordon
