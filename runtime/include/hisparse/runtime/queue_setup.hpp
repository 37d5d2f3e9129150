#pragma once
// Compile-time queue setup: the list of procedures, each with its number of
// queues (bins). Validated with Boost.Hana static_asserts so that a setup that
// cannot work does not compile. Plain C++ (no CUDA include): the checks can be
// exercised by the host compiler in the host test suite.
//
// A procedure is a type with
//   using payload_type = ...;                       // trivially copyable, <= max_payload_bytes
//   static constexpr std::uint32_t threads_per_item; // power of two, divides the block size
//   static constexpr std::uint32_t shared_bytes;     // per item (optional, default 0)
//   static constexpr const char* name;               // optional, used in messages
//   template <class Context>
//   __device__ static void run(const payload_type&, std::uint32_t lane,
//                              std::uint32_t group_size, const Context& ctx);
#include <boost/hana.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "config.hpp"

namespace hisparse::runtime {

namespace hana = boost::hana;

// Largest payload a queue slot holds. Items are copied into registers of every
// thread of their group, so large payloads should be references to memory.
inline constexpr std::size_t max_payload_bytes = 64;
inline constexpr std::size_t max_payload_alignment = 16;

namespace detail {
template <class P>
constexpr std::uint32_t shared_bytes_of() {
    if constexpr (requires { P::shared_bytes; })
        return static_cast<std::uint32_t>(P::shared_bytes);
    else
        return 0;
}
// Optional tuning policy of a procedure: the blocks per multiprocessor its
// worker grids must fit (__launch_bounds__), which caps its registers. A
// memory-bound leaf procedure wants many warps in flight more than registers.
template <class P>
constexpr std::uint32_t min_blocks_of() {
    if constexpr (requires { P::min_blocks_per_sm; })
        return static_cast<std::uint32_t>(P::min_blocks_per_sm);
    else
        return 1;
}
constexpr bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }
}  // namespace detail

// The part of the procedure contract a compiler can check without device code.
template <class P>
concept ProcedureDeclaration = requires {
    typename P::payload_type;
    { P::threads_per_item } -> std::convertible_to<std::uint32_t>;
};

template <class P>
std::string procedure_name(std::size_t index) {
    if constexpr (requires { { P::name } -> std::convertible_to<const char*>; })
        return P::name;
    else
        return "procedure#" + std::to_string(index);
}

// One procedure and how many queues (bins) it has.
template <class P, std::uint32_t Bins = 1>
struct ProcedureQueues {
    static_assert(ProcedureDeclaration<P>,
                  "a procedure needs `using payload_type` and `static constexpr std::uint32_t threads_per_item`");
    using procedure = P;
    using payload_type = typename P::payload_type;
    static constexpr std::uint32_t bins = Bins;
    static constexpr std::uint32_t threads_per_item = P::threads_per_item;
    static constexpr std::uint32_t shared_bytes = detail::shared_bytes_of<P>();

    static_assert(Bins >= 1, "a procedure needs at least one queue (bin)");
    static_assert(std::is_trivially_copyable_v<payload_type>,
                  "a payload is copied bytewise through device memory: it must be trivially copyable");
    static_assert(sizeof(payload_type) <= max_payload_bytes,
                  "payload does not fit a queue slot (max_payload_bytes = 64): store a reference instead");
    static_assert(alignof(payload_type) <= max_payload_alignment, "payload alignment above 16 bytes");
    static_assert(detail::is_power_of_two(threads_per_item), "threads_per_item must be a power of two");
};

template <std::uint32_t BlockSize, class... Entries>
struct QueueSetup {
    static constexpr std::uint32_t block_size = BlockSize;
    static constexpr std::size_t procedure_count = sizeof...(Entries);
    static constexpr std::uint32_t queue_count = (0u + ... + Entries::bins);

    static constexpr auto entries = hana::tuple_t<Entries...>;
    static constexpr auto procedures = hana::tuple_t<typename Entries::procedure...>;

    static_assert(procedure_count > 0, "a queue setup needs at least one procedure");
    static_assert(BlockSize % 32 == 0 && BlockSize >= 32 && BlockSize <= 1024,
                  "the block size must be a multiple of 32 between 32 and 1024");
    static_assert(hana::length(hana::to_set(procedures)) == hana::length(procedures),
                  "a procedure appears twice in the queue setup: give it more bins instead");
    static_assert(hana::all_of(entries,
                               [](auto e) {
                                   using E = typename decltype(e)::type;
                                   return hana::bool_c<(BlockSize % E::threads_per_item == 0 &&
                                                        E::threads_per_item <= BlockSize)>;
                               }),
                  "a procedure's threads_per_item must divide the block size");

    // Index of procedure P in the setup (compile time).
    template <class P>
    static constexpr std::size_t procedure_index() {
        constexpr auto found = hana::index_if(procedures, hana::equal.to(hana::type_c<P>));
        static_assert(found != hana::nothing, "this procedure is not part of the queue setup");
        return std::remove_cvref_t<decltype(found.value())>::value;
    }

    // Global queue id of a procedure's first bin, and of a (procedure, bin).
    template <class P>
    static constexpr std::uint32_t first_queue() {
        constexpr std::array<std::uint32_t, procedure_count> bins{Entries::bins...};
        std::array<std::uint32_t, procedure_count + 1> prefix{};
        for (std::size_t i = 0; i < procedure_count; ++i) prefix[i + 1] = prefix[i] + bins[i];
        return prefix[procedure_index<P>()];
    }
    template <class P>
    static constexpr std::uint32_t bins_of() {
        constexpr std::array<std::uint32_t, procedure_count> bins{Entries::bins...};
        return bins[procedure_index<P>()];
    }
    template <class P>
    static constexpr std::uint32_t queue_id(std::uint32_t bin = 0) {
        return first_queue<P>() + bin;
    }

    template <std::size_t I>
    using procedure_at = typename decltype(+hana::at_c<I>(procedures))::type;

    static SetupDescription describe() {
        SetupDescription d;
        d.max_block_size = BlockSize;
        std::uint32_t first = 0;
        std::size_t index = 0;
        auto add = [&]<class E>(E*) {
            ProcedureInfo info;
            info.name = procedure_name<typename E::procedure>(index++);
            info.payload_bytes = sizeof(typename E::payload_type);
            info.threads_per_item = E::threads_per_item;
            info.shared_bytes = E::shared_bytes;
            info.bins = E::bins;
            info.first_queue = first;
            first += E::bins;
            d.procedures.push_back(std::move(info));
        };
        (add(static_cast<Entries*>(nullptr)), ...);
        return d;
    }
};

}  // namespace hisparse::runtime
