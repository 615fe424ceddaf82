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

TEST_CASE("an intrusive list takes an item back at its place, and walks either way") {
    // What a pool's idle list does with a server lent to pgtether's own query (Pool::
    // on_server_transition): ordered by idle place, descending (LIFO).
    IntrusiveList<Item, &Item::a> list;
    Item a{30, {}, {}}, b{20, {}, {}}, c{10, {}, {}}, lent{25, {}, {}};
    for (Item* item : {&a, &b, &c}) list.push_back(*item);
    auto descending = [&](const Item& other) { return other.value < lent.value; };
    list.insert_sorted(lent, descending);
    std::vector<int> seen;
    list.for_each_const([&](const Item& item) { seen.push_back(item.value); });
    CHECK(seen == std::vector<int>{30, 25, 20, 10});
    // Before everything, and at the back when nothing goes after it.
    Item first{40, {}, {}}, last{5, {}, {}};
    list.insert_sorted(first, [&](const Item& other) { return other.value < first.value; });
    list.insert_sorted(last, [&](const Item& other) { return other.value < last.value; });
    CHECK(list.front() == &first);
    CHECK(list.back() == &last);
    // From the back, removal while walking allowed.
    seen.clear();
    list.for_each_reverse([&](Item& item) {
        seen.push_back(item.value);
        if (item.value < 25) list.remove(item);
    });
    CHECK(seen == std::vector<int>{5, 10, 20, 25, 30, 40});
    CHECK(list.size() == 3);
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
