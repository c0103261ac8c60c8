#include "umscope/json.hpp"

#include <cstdio>

namespace umscope {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void JsonObject::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + json_escape(k) + "\":";
}

JsonObject& JsonObject::set(const std::string& k, const std::string& v) {
  key(k);
  body_ += "\"" + json_escape(v) + "\"";
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, long long v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, unsigned long v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, unsigned long long v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, double v) {
  key(k);
  body_ += json_number(v);
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, const std::vector<double>& v) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) body_ += (i ? "," : "") + json_number(v[i]);
  body_ += "]";
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, const std::vector<std::string>& v) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) body_ += std::string(i ? "," : "") + "\"" + json_escape(v[i]) + "\"";
  body_ += "]";
  return *this;
}
JsonObject& JsonObject::set_raw(const std::string& k, const std::string& raw_json) {
  key(k);
  body_ += raw_json;
  return *this;
}

}  // namespace umscope
