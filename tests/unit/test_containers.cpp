// The proxy's two small containers: the intrusive list and the byte buffer.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "proxy/net/byte_buffer.hpp"
#include "proxy/net/intrusive_list.hpp"

using namespace pgtether;

namespace {
struct Item {
    int value = 0;
    ListHook a;
    ListHook b;
};
}  // namespace

TEST_CASE("an object can sit in two intrusive lists and leave either in O(1)") {
    IntrusiveList<Item, &Item::a> first;
    IntrusiveList<Item, &Item::b> second;
    Item x{1, {}, {}}, y{2, {}, {}}, z{3, {}, {}};
    first.push_back(x);
    first.push_back(y);
    first.push_front(z);
    second.push_back(y);
    CHECK(first.size() == 3);
    CHECK(first.front() == &z);
    CHECK(first.back() == &y);
    first.remove(y);
    CHECK(first.size() == 2);
    CHECK(second.contains(y));
    CHECK_FALSE(first.contains(y));
    first.remove(y);  // removing twice is harmless
    CHECK(first.size() == 2);
    std::vector<int> seen;
    first.for_each([&](Item& item) {
        seen.push_back(item.value);
        first.remove(item);  // removal while iterating
    });
    CHECK(seen == std::vector<int>{3, 1});
    CHECK(first.empty());
    CHECK(second.pop_front() == &y);
    CHECK(second.pop_front() == nullptr);
}

TEST_CASE("byte buffer appends, consumes and frees its memory when empty") {
    ByteBuffer buffer;
    CHECK(buffer.empty());
    buffer.append(std::string_view("hello "));
    buffer.append(std::string_view("world"));
    CHECK(buffer.size() == 11);
    buffer.consume(6);
    CHECK(protocol::as_chars(buffer.data()) == "world");
    // Growth keeps the live bytes.
    std::string big(100000, 'x');
    buffer.append(big);
    CHECK(buffer.size() == 5 + big.size());
    CHECK(protocol::as_chars(buffer.data()).substr(0, 5) == "world");
    auto room = buffer.prepare(10);
    CHECK(room.size() >= 10);
    room[0] = '!';
    buffer.commit(1);
    CHECK(protocol::as_chars(buffer.data()).back() == '!');
    buffer.consume(buffer.size());
    CHECK(buffer.empty());
    CHECK(buffer.prepare(1).size() >= 1);  // usable again after being freed
}
