// Minimal JSON writer for the JSON-lines records umbench prints.
#pragma once
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace umscope {

std::string json_escape(const std::string& s);

// Builds one flat JSON object; values are appended in insertion order.
class JsonObject {
 public:
  JsonObject& set(const std::string& k, const std::string& v);
  JsonObject& set(const std::string& k, const char* v) { return set(k, std::string(v)); }
  JsonObject& set(const std::string& k, bool v);
  JsonObject& set(const std::string& k, int v) { return set(k, static_cast<long long>(v)); }
  JsonObject& set(const std::string& k, long v) { return set(k, static_cast<long long>(v)); }
  JsonObject& set(const std::string& k, long long v);
  JsonObject& set(const std::string& k, unsigned v) { return set(k, static_cast<long long>(v)); }
  JsonObject& set(const std::string& k, unsigned long v);
  JsonObject& set(const std::string& k, unsigned long long v);
  JsonObject& set(const std::string& k, double v);
  JsonObject& set(const std::string& k, const std::vector<double>& v);
  JsonObject& set(const std::string& k, const std::vector<std::string>& v);
  JsonObject& set_raw(const std::string& k, const std::string& raw_json);
  // Appends every field of `o` (after this object's own).
  JsonObject& merge(const JsonObject& o) {
    if (!o.body_.empty()) body_ += (body_.empty() ? "" : ",") + o.body_;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

std::string json_number(double v);

}  // namespace umscope
