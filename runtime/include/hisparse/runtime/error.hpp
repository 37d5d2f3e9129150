#pragma once
// Errors of the runtime. Everything that goes wrong on the device or in the
// configuration ends up as one of these exceptions on the host; nothing is
// reported only through a return code or a log line.
#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>

namespace hisparse::runtime {

// Base of every runtime error, so a caller can catch the layer as a whole.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A configuration that cannot work (detected before anything touches the GPU).
class ConfigError : public Error {
public:
    using Error::Error;
};

// A CUDA API call failed; what() names the call, the CUDA error and the place.
class CudaError : public Error {
public:
    CudaError(int code, const std::string& message) : Error(message), code_(code) {}
    [[nodiscard]] int code() const noexcept { return code_; }

private:
    int code_;
};

// A queue ran out of slots: items were dropped, so the run's result is invalid.
class QueueOverflow : public Error {
public:
    QueueOverflow(std::string queue_name, std::uint32_t capacity, const std::string& message)
        : Error(message), queue_name_(std::move(queue_name)), capacity_(capacity) {}
    [[nodiscard]] const std::string& queue_name() const noexcept { return queue_name_; }
    [[nodiscard]] std::uint32_t capacity() const noexcept { return capacity_; }

private:
    std::string queue_name_;
    std::uint32_t capacity_;
};

// A run did not finish within the configured watchdog time; the device work was
// asked to stop and the runtime re-initialises its queues on the next run.
class WatchdogTimeout : public Error {
public:
    using Error::Error;
};

// The device reported an inconsistency (a failed device-side launch, an item
// enqueued into a bin that does not exist, items left over after the end).
class DeviceFault : public Error {
public:
    using Error::Error;
};

namespace detail {
// Throws CudaError when code != 0 (cudaSuccess). Takes an int so this header
// needs no CUDA include and stays usable from plain C++.
void throw_cuda_error(int code, const char* call, std::source_location where);
}  // namespace detail

}  // namespace hisparse::runtime
