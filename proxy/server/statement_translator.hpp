// Prepared-statement translation for a client on its linked backend
// (docs/prepared-statements.md): the one place that changes the two statement maps -- the
// client's names (ClientStatements: name → statement) and the backend's prepared set
// (ServerStatements) -- carrying out core/statement_translation.hpp's decisions. It writes the
// rewritten and injected messages, queues the requests whose replies the backend's RequestQueue
// matches (injected replies swallowed, pgtether's own answers emitted in their place), and keeps
// both maps true: DISCARD ALL / DEALLOCATE ALL (forget_all), a lone DEALLOCATE (deallocate).
//
// A translator is a few references, made on the stack for the message that needs it; the maps
// stay where they live (the client's with the client, the backend's with the backend), since a
// backend's set outlives the clients it serves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/prepared_statements.hpp"
#include "core/request_queue.hpp"
#include "core/statement_translation.hpp"
#include "protocol/bytes.hpp"
#include "protocol/frontend_messages.hpp"

namespace pgtether {

struct Config;
class Server;

class StatementTranslator {
  public:
    // Where rewritten and injected messages go: the client's batch towards the backend.
    class Output {
      public:
        virtual void add_owned(std::string message) = 0;

      protected:
        ~Output() = default;
    };

    StatementTranslator(ClientStatements& names, Server& server, const Config& config, Output& out)
        : names_(names), server_(server), config_(config), out_(out) {}

    // The statement the client prepared under `name`, or null.
    [[nodiscard]] StatementPtr find(std::string_view name) const { return names_.find(name); }

    // A named Parse: what the two maps say it gets (core/statement_translation.hpp).
    [[nodiscard]] ParseAction decide_parse(const protocol::ParseMessage& parse) const;
    // ForwardRemember / ForwardRememberEffects: the name stands for `statement` from now on.
    void remember(std::string_view name, StatementPtr statement);
    // RefuseDuplicate / RefuseTooMany / RefuseTooLarge: the error, in the backend's place (the
    // caller discards the batch up to Sync).
    void refuse_parse(ParseAction action, std::string_view name);
    // Translate: the name stands for `statement`, prepared afresh on the backend.
    void translate_parse(std::string_view name, StatementPtr statement);

    // What became of a client's Bind, Describe or Close.
    enum class Routed {
        AsSent,     // the caller forwards it unchanged
        Rewritten,  // the translator wrote what goes instead (or answered it)
        Refused,    // a reserved name: the error is queued; the caller discards up to Sync
    };
    // A Bind of `statement` (what the client named, null if unknown): rewritten to the backend
    // name, behind a Parse if the backend lacks it. `body_missing`: bytes of a streamed Bind's
    // body still to come.
    Routed bind(const protocol::BindNames& names, const StatementPtr& statement,
                protocol::ByteSpan body, std::size_t body_missing);
    // A Describe or Close (`type`) of a statement or portal.
    Routed describe_or_close(protocol::ByteSpan body, char type);

    // Queues a reply pgtether gives itself, in its place in the reply stream.
    void answer(QueuedRequest::Kind kind, char type, std::string reply);

    // `DEALLOCATE name` answered by pgtether (no backend involved): whether the client had it.
    static bool deallocate(ClientStatements& names, std::string_view name) {
        return names.remove(name) != nullptr;
    }
    // DISCARD ALL / DEALLOCATE ALL completed on the backend: it and its client (null once the
    // client has left) forgot every prepared statement.
    static void forget_all(ClientStatements* names, ServerStatements& server) {
        server.clear();
        if (names) names->clear();
    }

  private:
    // What a Bind or Describe of `statement` (null: a name the client never prepared) named
    // `name` gets.
    [[nodiscard]] UseAction decide_use_of(const StatementPtr& statement,
                                          std::string_view name) const;
    // The 42939 error for a reserved `name` in the backend's place.
    void refuse_reserved(char type, std::string_view name);
    // Rewrite: the backend has it (now its most recently used); PrepareAndRewrite: prepares
    // it there first, evicting if over capacity.
    void ensure_prepared(UseAction action, const StatementPtr& statement);
    // Queues the Closes of the statements the backend must evict to take `statement`.
    void make_room_for(const StatementPtr& statement);
    // Queues an injected Close of `statement` (`undo`: QueuedRequest).
    void close_on_server(const StatementPtr& statement, std::uint8_t undo);
    // Parse of `statement` under its backend name, after make_room_for; the caller queues the
    // request its ParseComplete answers.
    void write_server_parse(const StatementPtr& statement);

    ClientStatements& names_;
    Server& server_;
    const Config& config_;
    Output& out_;
};

}  // namespace pgtether
