// A minimal intrusive doubly-linked list: O(1) insert/remove with no allocation, so that a
// connection can move between a pool's idle, active and waiting lists on every transaction without
// touching the heap. An object joins one list per ListHook member it has.
#pragma once

#include <cstddef>

namespace pgtether {

struct ListHook {
    ListHook* prev = nullptr;
    ListHook* next = nullptr;
    void* owner = nullptr;  // the object this hook is a member of, set on insertion
    [[nodiscard]] bool linked() const { return next != nullptr; }
};

// T must have a member `ListHook Hook`; the list stores pointers to that member.
template <typename T, ListHook T::*Hook>
class IntrusiveList {
public:
    IntrusiveList() { head_.prev = head_.next = &head_; }
    IntrusiveList(const IntrusiveList&) = delete;
    IntrusiveList& operator=(const IntrusiveList&) = delete;

    [[nodiscard]] bool empty() const { return head_.next == &head_; }
    [[nodiscard]] std::size_t size() const { return size_; }

    void push_back(T& item) { insert_before(&head_, hook_of(item)); }
    void push_front(T& item) { insert_before(head_.next, hook_of(item)); }
    // Inserts `item` before the first item for which `goes_after(existing)` holds (at the back
    // if none does): how a sorted list takes an item back at its place.
    template <typename F>
    void insert_sorted(T& item, F&& goes_after) {
        ListHook* pos = head_.next;
        while (pos != &head_ && !goes_after(*owner(pos))) pos = pos->next;
        insert_before(pos, hook_of(item));
    }
    void remove(T& item) {
        ListHook* h = &(item.*Hook);
        if (!h->linked()) return;
        h->prev->next = h->next;
        h->next->prev = h->prev;
        h->prev = h->next = nullptr;
        --size_;
    }
    [[nodiscard]] bool contains(const T& item) const { return (item.*Hook).linked(); }
    T* front() { return empty() ? nullptr : owner(head_.next); }
    T* back() { return empty() ? nullptr : owner(head_.prev); }
    T* pop_front() {
        T* item = front();
        if (item) remove(*item);
        return item;
    }
    T* pop_back() {
        T* item = back();
        if (item) remove(*item);
        return item;
    }

    // The first of the first `limit` items that satisfies `pred`, or nullptr.
    template <typename F>
    T* find_first(F&& pred, std::size_t limit) {
        for (ListHook* h = head_.next; h != &head_ && limit > 0; h = h->next, --limit) {
            if (pred(*owner(h))) return owner(h);
        }
        return nullptr;
    }

    // Iteration for readers (no removal).
    template <typename F>
    void for_each_const(F&& f) const {
        for (const ListHook* h = head_.next; h != &head_; h = h->next) {
            const T& item = *owner(h);
            f(item);
        }
    }

    // Iteration that tolerates removal of the current element: the callback may remove `item`.
    template <typename F>
    void for_each(F&& f) {
        for (ListHook* h = head_.next; h != &head_;) {
            ListHook* next = h->next;
            f(*owner(h));
            h = next;
        }
    }

    // The same from the back to the front.
    template <typename F>
    void for_each_reverse(F&& f) {
        for (ListHook* h = head_.prev; h != &head_;) {
            ListHook* prev = h->prev;
            f(*owner(h));
            h = prev;
        }
    }

private:
    static T* owner(const ListHook* h) { return static_cast<T*>(h->owner); }
    static ListHook* hook_of(T& item) {
        ListHook* h = &(item.*Hook);
        h->owner = &item;
        return h;
    }
    void insert_before(ListHook* pos, ListHook* h) {
        h->next = pos;
        h->prev = pos->prev;
        pos->prev->next = h;
        pos->prev = h;
        ++size_;
    }

    ListHook head_;
    std::size_t size_ = 0;
};

}  // namespace pgtether
