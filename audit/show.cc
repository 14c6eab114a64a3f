// The timeline: one line per record, with the columns the catalog marks for showing.
#include "audit/show.h"

#include <fstream>
#include <sstream>

#include "audit/records.h"
#include "core/text.h"

namespace cordon {

Result<std::string> ShowAuditLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot open audit log " + path, errno, path);
  std::ostringstream out;
  std::string line;
  std::uint64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      out << "line " << n << ": (not a record, " << line.size() << " bytes)\n";
      continue;
    }
    std::string ts = rec.value("ts", std::string());
    std::string session = rec.value("session", std::string()).substr(0, 8);
    std::string type = rec.value("type", std::string());
    out << ts << "  " << session << "  #" << rec.value("seq", 0) << "  " << type;
    for (std::string_view key : AuditShowKeys()) {
      const std::string k(key);
      if (rec.contains(k)) out << "  " << k << "=" << DumpJson(rec[k]);
    }
    out << "\n";
  }
  return out.str();
}

Result<Json> ShowAuditLogJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(Code::kNotFound, "cannot open audit log " + path, errno, path);
  Json records = Json::array(), unreadable = Json::array();
  std::string line;
  std::uint64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    Json rec = Json::parse(line, nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) {
      unreadable.push_back({{"line", n}, {"bytes", line.size()}});
      continue;
    }
    records.push_back(std::move(rec));
  }
  return Json{
      {"path", path}, {"records", std::move(records)}, {"unreadable", std::move(unreadable)}};
}

}  // namespace cordon
