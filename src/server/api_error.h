// An error answered to an HTTP client, in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": <status>}}
// Thrown by request parsing and caught by the route handlers.
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace cpinfer {

struct ApiError : std::runtime_error {
  int status;
  std::string type;
  std::string param;
  ApiError(int status_, std::string message, std::string param_ = {},
           std::string type_ = {})
      : std::runtime_error(std::move(message)),
        status(status_),
        type(type_.empty() ? default_type(status_) : std::move(type_)),
        param(std::move(param_)) {}

  static std::string default_type(int status) {
    switch (status) {
      case 401: return "authentication_error";
      case 404: return "NotFoundError";
      case 413: return "request_too_large";
      case 500: return "internal_server_error";
      case 503: return "service_unavailable";
      default: return "BadRequestError";
    }
  }
  nlohmann::json to_json() const {
    nlohmann::json e = {{"message", what()}, {"type", type}, {"code", status}};
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    return {{"error", e}};
  }
};

// JSON text safe for any bytes: invalid UTF-8 (e.g. a token that is half a character)
// becomes U+FFFD instead of an exception.
inline std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace cpinfer
