#include "audit/knowledge.h"

#include "core/before_images.h"
#include "core/fs.h"
#include "core/hash.h"

namespace cordon {

std::string RedactionKnowledgeDir() { return CordonStateDir() + "/redaction-knowledge"; }

Result<Json> StoreRedactionKnowledge(const Redactor& r, const std::string& dir) {
  const Json k = r.Knowledge();
  const std::string text = k.dump();
  const std::string sha = Sha256Hex(text);
  // The store's caps are for file images; knowledge is one file per distinct set.
  BeforeImageStore store(dir, BeforeImageLimits{std::uint64_t{1} << 30, std::uint64_t{1} << 30});
  const BeforeImageOutcome put = store.Put(text, sha);
  if (put.status != "stored") {
    return Fail(Code::kInternal, "the session's redaction knowledge could not be stored: " +
                                     (put.error.empty() ? put.status : put.error));
  }
  std::size_t n = 0;
  for (const auto& [rule, entries] : k["hashes"].items()) n += entries.size();
  return Json{{"sha256", sha}, {"hashes", n}, {"rules_sha256", k["rules_sha256"]}};
}

Status LoadRedactionKnowledge(const Json& named, const std::string& dir, Redactor& into) {
  if (!named.is_object() || !named.contains("sha256") || !named["sha256"].is_string()) {
    return Fail(Code::kNotFound, "the session recorded no redaction knowledge (" +
                                     (named.is_object() && named.contains("error")
                                          ? named["error"].dump()
                                          : std::string("written by an older cordon")) +
                                     ")");
  }
  const std::string sha = named["sha256"].get<std::string>();
  auto text = ReadBeforeImage(dir, sha, std::uint64_t{1} << 30);
  if (!text) {
    if (text.error().code == Code::kNotFound) {
      return Fail(Code::kNotFound,
                  "the session's redaction knowledge " + sha + " is gone from " + dir);
    }
    return Fail(text.error().code, "the session's redaction knowledge " + sha + " in " + dir +
                                       ": " + text.error().message + "; not used");
  }
  const Json k = Json::parse(*text, nullptr, false);
  if (k.is_discarded()) {
    return Fail(Code::kInvalidInput, "the session's redaction knowledge is not JSON");
  }
  return into.AddKnowledge(k);
}

}  // namespace cordon
