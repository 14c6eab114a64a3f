// cordon audit verify | show | keygen | rotate: check a log's chain and completeness, print it
// as a timeline, make a checkpoint signing key, start a new log file linked to the old one.
#include "audit/audit.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "cli/common.h"

namespace cordon::cli {
namespace {

struct VerifyFlags {
  std::vector<std::string> logs;
  std::string key_file, witness, require;
  std::vector<std::string> pubkeys;
  bool json = false;
};

int VerifyExit(VerifyReport::Verdict v) {
  using V = VerifyReport::Verdict;
  switch (v) {
    case V::kIntact:
      return kExitOk;
    case V::kTornTail:
      return kExitTornTail;
    case V::kBroken:
      return kExitToolError;
    case V::kUnprovenTail:
      return kExitUnprovenTail;
    case V::kCut:
      return kExitCut;
    case V::kWeakerMode:
      return kExitWeakerMode;
    case V::kNoCheckpoint:
      return kExitNoCheckpoint;
  }
  return kExitToolError;
}

const char* VerdictName(VerifyReport::Verdict v) {
  using V = VerifyReport::Verdict;
  switch (v) {
    case V::kIntact:
      return "intact";
    case V::kTornTail:
      return "torn";
    case V::kBroken:
      return "broken";
    case V::kUnprovenTail:
      return "unproven_tail";
    case V::kCut:
      return "cut";
    case V::kWeakerMode:
      return "weaker_mode";
    case V::kNoCheckpoint:
      return "no_checkpoint";
  }
  return "broken";
}

int Report(const VerifyReport& r, bool json, Json* out);

int Verify(const VerifyFlags& f) {
  VerifyOptions options;
  if (!f.key_file.empty()) {
    auto k = ReadKeyFile(f.key_file);
    if (!k) {
      std::fprintf(stderr, "cordon: %s\n", k.error().ToString().c_str());
      return kExitStart;
    }
    options.hmac_key = *k;
  }
  for (const auto& p : f.pubkeys) {
    auto k = Ed25519Key::LoadPublic(p);
    if (!k) {
      std::fprintf(stderr, "cordon: %s\n", k.error().ToString().c_str());
      return kExitStart;
    }
    options.pubkeys.push_back(std::move(*k));
  }
  if (!f.witness.empty()) options.witness_path = f.witness;
  using Require = VerifyOptions::Require;
  if (f.require == "plain") options.require = Require::kPlain;
  if (f.require == "hmac") options.require = Require::kHmac;
  if (f.require == "signed") options.require = Require::kSigned;
  if (options.require == Require::kSigned && options.pubkeys.empty()) {
    std::fprintf(stderr, "cordon: --require signed needs --pubkey\n");
    return kExitUsage;
  }
  // --- checkpoint: several files (or a directory of them) are verified each on its own, and a
  // file that continues another after `audit rotate` is checked against it.
  std::vector<std::string> files;
  for (const auto& arg : f.logs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(arg, ec)) {
      files.push_back(arg);
      continue;
    }
    std::vector<std::string> in_dir;
    std::error_code other_ec;
    for (const auto& e : std::filesystem::directory_iterator(arg, ec)) {
      // The witness may sit beside the logs; it is no log.
      if (e.is_regular_file(ec) && e.path().filename().string()[0] != '.' &&
          (f.witness.empty() || !std::filesystem::equivalent(e.path(), f.witness, other_ec))) {
        in_dir.push_back(e.path().string());
      }
    }
    if (ec) {
      std::fprintf(stderr, "cordon: cannot list %s: %s\n", arg.c_str(), ec.message().c_str());
      return kExitStart;
    }
    std::sort(in_dir.begin(), in_dir.end());
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  if (files.empty()) {
    std::fprintf(stderr, "cordon: no audit log in %s\n", f.logs.front().c_str());
    return kExitStart;
  }
  if (files.size() == 1 && f.logs.size() == 1 && files[0] == f.logs[0]) {
    auto report = VerifyAuditLog(files[0], options);
    if (!report) {
      std::fprintf(stderr, "cordon: %s\n", report.error().ToString().c_str());
      return kExitStart;
    }
    Json j;
    const int code = Report(*report, f.json, f.json ? &j : nullptr);
    if (f.json) std::cout << j.dump(2) << "\n";
    return code;
  }
  Json all = {{"files", Json::array()}, {"links", Json::array()}};
  std::vector<int> codes;
  std::map<std::string, std::string> by_log_id;        // log_id -> file
  std::vector<std::pair<std::string, Json>> previous;  // file -> its log_started.previous
  for (const auto& file : files) {
    if (!f.json) std::cout << "== " << file << "\n";
    auto report = VerifyAuditLog(file, options);
    if (!report) {
      std::fprintf(stderr, "cordon: %s\n", report.error().ToString().c_str());
      return kExitStart;
    }
    Json j;
    codes.push_back(Report(*report, f.json, f.json ? &j : nullptr));
    if (f.json) {
      j["path"] = file;
      all["files"].push_back(std::move(j));
    }
    if (!report->log_id.empty()) by_log_id.emplace(report->log_id, file);
    if (report->previous)
      previous.emplace_back(file, Json::parse(*report->previous, nullptr, false));
  }
  if (!f.json && !previous.empty()) std::cout << "== rotation links\n";
  for (const auto& [file, prev] : previous) {
    const std::string old_id = prev.is_object() ? prev.value("log_id", "") : "";
    auto it = by_log_id.find(old_id);
    Json link = {{"file", file}, {"previous_log_id", old_id}};
    if (it == by_log_id.end()) {
      link["checked"] = false;
      if (!f.json) {
        std::cout << "warning: " << file << " continues log " << old_id
                  << ", which is not among the files given: the link is not checked\n";
      }
    } else {
      const std::string why = CheckRotationLink(it->second, prev, options.hmac_key);
      link["checked"] = true;
      link["previous_file"] = it->second;
      link["ok"] = why.empty();
      if (!why.empty()) {
        link["problem"] = why;
        codes.push_back(kExitCut);
      }
      if (!f.json) {
        if (why.empty()) {
          std::cout << "ok: " << file << " continues " << it->second << " at its line "
                    << prev.value("lines", 0) << "\n";
        } else {
          std::cout << "CUT: " << file << " continues " << it->second << ", but " << why << "\n";
        }
      }
    }
    all["links"].push_back(std::move(link));
  }
  // The worst outcome, in the order of docs/audit.md "Verify outcomes".
  int code = kExitOk;
  for (int c : {kExitToolError, kExitCut, kExitGap, kExitTornTail, kExitWeakerMode,
                kExitNoCheckpoint, kExitUnprovenTail}) {
    if (std::find(codes.begin(), codes.end(), c) != codes.end()) {
      code = c;
      break;
    }
  }
  if (f.json) {
    all["exit_code"] = code;
    std::cout << all.dump(2) << "\n";
  }
  return code;
}

// One file's report, printed (or, with `json`, built into *out); returns its exit code.
int Report(const VerifyReport& r, bool json, Json* out) {
  int code = VerifyExit(r.verdict);
  // --- failclosed: a chain that is whole but records a gap is not complete.
  const bool gap = r.gaps > 0 && r.verdict != VerifyReport::Verdict::kBroken &&
                   r.verdict != VerifyReport::Verdict::kCut;
  if (gap) code = kExitGap;
  if (json) {
    Json j = {{"verdict", gap ? "gap" : VerdictName(r.verdict)},
              {"exit_code", code},
              {"records", r.records},
              {"sessions", r.sessions},
              {"bytes", r.bytes},
              {"mode", r.mode},
              {"signed", r.signed_checked},
              {"log_id", r.log_id},
              {"checkpoints", r.checkpoints},
              {"proven_lines", r.proven_lines},
              {"proven_bytes", r.proven_bytes},
              {"unproven_records", r.unproven_records},
              {"witness_checkpoints", r.witness_checkpoints},
              {"unfinished_sessions", r.unfinished_sessions},
              {"warnings", r.warnings},
              {"gaps", r.gaps},
              {"lost_records", r.lost_records},
              {"detached", r.detached},
              {"unwalked", r.unwalked}};
    if (!r.problem.empty()) j["problem"] = r.problem;
    if (r.first_bad_line != 0) j["first_bad_line"] = r.first_bad_line;
    if (r.previous) j["previous"] = Json::parse(*r.previous, nullptr, false);
    *out = std::move(j);
    return code;
  }
  for (const auto& w : r.warnings) std::cout << "warning: " << w << "\n";
  if (r.previous) std::cout << "continues: " << *r.previous << "\n";
  for (const auto& s : r.unfinished_sessions) {
    std::cout << "unfinished: session " << s << " has no session_finished\n";
  }
  if (r.checkpoints > 0) {
    std::cout << "checkpoints: " << r.checkpoints << (r.signed_checked ? " signed" : "")
              << ", complete up to line " << r.proven_lines << " (" << r.proven_bytes << " bytes)";
    if (r.witness_checkpoints > 0) std::cout << ", " << r.witness_checkpoints << " witnessed";
    std::cout << "\n";
  }
  if (gap) {
    std::cout << "GAP: " << r.lost_records << " record(s) lost in " << r.gaps << " gap(s); "
              << r.gap_problem << "; the chain of the " << r.records
              << " records present is unbroken\n";
  }
  switch (r.verdict) {
    case VerifyReport::Verdict::kIntact:
      if (gap) break;
      std::cout << "ok: " << r.records << " records, " << r.sessions << " sessions, chain "
                << r.mode << " intact\n";
      break;
    case VerifyReport::Verdict::kTornTail:
      std::cout << "torn: " << r.problem << "; the " << r.records
                << " records before it are intact";
      if (r.checkpoints > 0) std::cout << ", " << r.unproven_records << " of them unproven";
      std::cout << "\n";
      break;
    case VerifyReport::Verdict::kBroken:
      std::cout << "BROKEN at line " << r.first_bad_line << ": " << r.problem << "\n";
      break;
    case VerifyReport::Verdict::kUnprovenTail:
      std::cout << "unproven tail: " << r.problem << "\n";
      break;
    case VerifyReport::Verdict::kCut:
      std::cout << "CUT: " << r.problem << "\n";
      break;
    case VerifyReport::Verdict::kWeakerMode:
      std::cout << "weaker mode: " << r.problem << "\n";
      break;
    case VerifyReport::Verdict::kNoCheckpoint:
      std::cout << "not proven: " << r.problem << "\n";
      break;
  }
  return code;
}

int Show(const std::string& log) {
  auto text = ShowAuditLog(log);
  if (!text) {
    std::fprintf(stderr, "cordon: %s\n", text.error().ToString().c_str());
    return kExitStart;
  }
  std::cout << *text;
  return kExitOk;
}

int Keygen(const std::string& out_dir, std::string priv, std::string pub) {
  if (!out_dir.empty()) {
    if (::mkdir(out_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      std::perror(("cordon: mkdir " + out_dir).c_str());
      return kExitStart;
    }
    if (priv.empty()) priv = out_dir + "/audit-signing.key";
    if (pub.empty()) pub = out_dir + "/audit-signing.pub";
  }
  if (priv.empty() || pub.empty()) {
    std::fprintf(stderr, "cordon: give --out DIR, or both --private and --public\n");
    return kExitUsage;
  }
  auto id = WriteNewKeyPair(priv, pub);
  if (!id) {
    std::fprintf(stderr, "cordon: %s\n", id.error().ToString().c_str());
    return kExitStart;
  }
  std::cout << "key id " << *id << "\nprivate " << priv << "\npublic " << pub << "\n";
  return kExitOk;
}

int Rotate(const std::string& log, const std::string& key_file, const std::string& signing_key) {
  std::optional<std::string> key;
  if (!key_file.empty()) {
    auto k = ReadKeyFile(key_file);
    if (!k) {
      std::fprintf(stderr, "cordon: %s\n", k.error().ToString().c_str());
      return kExitStart;
    }
    key = *k;
  }
  CheckpointConfig cp;
  if (!signing_key.empty()) {
    auto k = Ed25519Key::LoadPrivate(signing_key);
    if (!k) {
      std::fprintf(stderr, "cordon: %s\n", k.error().ToString().c_str());
      return kExitStart;
    }
    cp.key = std::make_shared<const Ed25519Key>(std::move(*k));
  }
  auto rotated = RotateAuditLog(log, key, cp);
  if (!rotated) {
    std::fprintf(stderr, "cordon: %s\n", rotated.error().ToString().c_str());
    return kExitStart;
  }
  std::cout << "rotated: " << log << " -> " << *rotated << "; " << log
            << " starts a new log linked to it\n";
  return kExitOk;
}

}  // namespace

void AddAuditCommand(CLI::App& root, Context& ctx) {
  struct Flags {
    std::string log, key_file, out, priv, pub, signing_key;
    VerifyFlags verify;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* audit = root.add_subcommand("audit", "check or read an audit log")
                        ->group("Commands")
                        ->require_subcommand(1);
  CLI::App* verify = audit->add_subcommand("verify", "check a log's hash chain and completeness")
                         ->group("Commands");
  verify
      ->add_option("LOG", f->verify.logs,
                   "the audit log; several files, or a directory, are verified each on its own "
                   "and their rotation links checked")
      ->required()
      ->type_name("FILE|DIR");
  verify->add_option("--key-file", f->verify.key_file, "the key of an HMAC-SHA-256 chain")
      ->type_name("FILE");
  verify
      ->add_option("--pubkey", f->verify.pubkeys,
                   "a checkpoint public key (repeat for rotated keys)")
      ->type_name("FILE");
  verify
      ->add_option("--witness", f->verify.witness,
                   "the checkpoints written outside the log (--audit-witness)")
      ->type_name("FILE");
  WithChoices(ctx, verify->add_option("--require", f->verify.require, "the weakest mode to accept"),
              {"plain", "hmac", "signed"}, [](const std::string& v) -> Status {
                if (v == "plain" || v == "hmac" || v == "signed") return {};
                return Fail(Code::kInvalidInput, "--require takes plain, hmac or signed");
              });
  verify->add_flag("--json", f->verify.json, "print the report as JSON");
  verify->footer(
      "exit codes: 0 intact (and complete up to the last checkpoint), 1 broken (the first bad "
      "line is named), 3 unreadable log or key, 4 intact but for a torn last line, 5 records "
      "after the last checkpoint are unproven, 6 cut or replaced (the witness is ahead), 7 mode "
      "weaker than --require, 8 empty or no checkpoint, 9 a gap record; with several files, the "
      "worst of them (a rotation link that does not hold: 6)");
  ctx.run[verify] = [f] { return Verify(f->verify); };
  CLI::App* show =
      audit->add_subcommand("show", "print a readable timeline of a log")->group("Commands");
  show->add_option("LOG", f->log, "the audit log")->required()->type_name("FILE");
  ctx.run[show] = [f] { return Show(f->log); };
  CLI::App* keygen = audit->add_subcommand("keygen", "make an Ed25519 checkpoint signing key pair")
                         ->group("Commands");
  keygen->add_option("--out", f->out, "write audit-signing.key (0600) and audit-signing.pub here")
      ->type_name("DIR");
  keygen->add_option("--private", f->priv, "the private key file (PEM PKCS#8, 0600)")
      ->type_name("FILE");
  keygen->add_option("--public", f->pub, "the public key file (PEM)")->type_name("FILE");
  ctx.run[keygen] = [f] { return Keygen(f->out, f->priv, f->pub); };
  CLI::App* rotate =
      audit->add_subcommand("rotate", "rename LOG to LOG.N and start a new LOG linked to it")
          ->group("Commands");
  rotate->add_option("LOG", f->log, "the audit log")->required()->type_name("FILE");
  rotate->add_option("--key-file", f->key_file, "the key of an HMAC-SHA-256 chain")
      ->type_name("FILE");
  rotate->add_option("--audit-signing-key", f->signing_key, "the checkpoint key the new file names")
      ->type_name("FILE");
  ctx.run[rotate] = [f] { return Rotate(f->log, f->key_file, f->signing_key); };
}

}  // namespace cordon::cli
