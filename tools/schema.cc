// Recursive validation with JSON-pointer error messages; depth is bounded by the schema itself.
#include "tools/schema.h"

#include <set>

namespace cordon {
namespace {

bool TypeMatches(const std::string& type, const Json& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

std::string TypeName(const Json& v) {
  if (v.is_number_integer()) return "integer";
  return v.type_name();
}

std::string Validate(const Json& s, const Json& v, const std::string& at) {
  const std::string where = at.empty() ? "/" : at;
  if (auto t = s.find("type"); t != s.end()) {
    bool ok = false;
    if (t->is_string()) {
      ok = TypeMatches(t->get<std::string>(), v);
    } else {
      for (const auto& alt : *t) ok = ok || TypeMatches(alt.get<std::string>(), v);
    }
    if (!ok) return where + ": expected " + t->dump() + ", got " + TypeName(v);
  }
  if (auto e = s.find("enum"); e != s.end()) {
    bool ok = false;
    for (const auto& alt : *e) ok = ok || alt == v;
    if (!ok) return where + ": must be one of " + e->dump();
  }
  if (auto c = s.find("const"); c != s.end() && *c != v) {
    return where + ": must be " + c->dump();
  }
  if (v.is_number()) {
    if (auto m = s.find("minimum"); m != s.end() && v.get<double>() < m->get<double>()) {
      return where + ": must be at least " + m->dump();
    }
    if (auto m = s.find("maximum"); m != s.end() && v.get<double>() > m->get<double>()) {
      return where + ": must be at most " + m->dump();
    }
  }
  if (v.is_string()) {
    // Lengths are in bytes: cordon's limits are byte limits.
    std::size_t n = v.get_ref<const std::string&>().size();
    if (auto m = s.find("minLength"); m != s.end() && n < m->get<std::size_t>()) {
      return where + ": must be at least " + m->dump() + " bytes long";
    }
    if (auto m = s.find("maxLength"); m != s.end() && n > m->get<std::size_t>()) {
      return where + ": must be at most " + m->dump() + " bytes long";
    }
  }
  if (v.is_array()) {
    if (auto m = s.find("minItems"); m != s.end() && v.size() < m->get<std::size_t>()) {
      return where + ": needs at least " + m->dump() + " items";
    }
    if (auto m = s.find("maxItems"); m != s.end() && v.size() > m->get<std::size_t>()) {
      return where + ": allows at most " + m->dump() + " items";
    }
    if (auto items = s.find("items"); items != s.end()) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::string err = Validate(*items, v[i], at + "/" + std::to_string(i));
        if (!err.empty()) return err;
      }
    }
  }
  if (v.is_object()) {
    const Json empty = Json::object();
    auto props_it = s.find("properties");
    const Json& props = props_it != s.end() ? *props_it : empty;
    if (auto req = s.find("required"); req != s.end()) {
      for (const auto& name : *req) {
        if (!v.contains(name.get<std::string>())) {
          return where + ": missing required field \"" + name.get<std::string>() + "\"";
        }
      }
    }
    auto extra = s.find("additionalProperties");
    for (const auto& [key, val] : v.items()) {
      if (auto p = props.find(key); p != props.end()) {
        std::string err = Validate(*p, val, at + "/" + key);
        if (!err.empty()) return err;
      } else if (extra != s.end()) {
        if (extra->is_boolean() && !extra->get<bool>()) {
          return where + ": unknown field \"" + key + "\"";
        }
        if (extra->is_object()) {
          std::string err = Validate(*extra, val, at + "/" + key);
          if (!err.empty()) return err;
        }
      }
    }
  }
  return {};
}

}  // namespace

std::string ValidateAgainstSchema(const Json& schema, const Json& value) {
  return Validate(schema, value, "");
}

bool SchemaIsSupported(const Json& schema, std::string* why) {
  static const std::set<std::string> kKeywords = {
      "type",     "properties",  "required",  "additionalProperties",
      "items",    "enum",        "const",     "minimum",
      "maximum",  "minLength",   "maxLength", "minItems",
      "maxItems", "description", "default",   "title",
      "$schema"};
  if (!schema.is_object()) {
    *why = "schema is not an object";
    return false;
  }
  for (const auto& [k, v] : schema.items()) {
    if (!kKeywords.count(k)) {
      *why = "unsupported keyword " + k;
      return false;
    }
    if (k == "properties") {
      for (const auto& [_, sub] : v.items()) {
        if (!SchemaIsSupported(sub, why)) return false;
      }
    }
    if ((k == "items" || (k == "additionalProperties" && v.is_object())) &&
        !SchemaIsSupported(v, why)) {
      return false;
    }
  }
  return true;
}

}  // namespace cordon
