#include "proxy/server/statement_translator.hpp"

#include "core/config.hpp"
#include "protocol/backend_messages.hpp"
#include "protocol/message_types.hpp"
#include "proxy/net/log.hpp"
#include "proxy/pool/pool.hpp"
#include "proxy/server/server.hpp"

namespace pgtether {

namespace fe = protocol::fe;
using protocol::ByteSpan;

namespace {

std::string error_message(const char* sqlstate, std::string message) {
    std::string out;
    protocol::append_error_response(out, {"ERROR", sqlstate, std::move(message), {}, {}});
    return out;
}

std::string simple_message(char type) {
    std::string out;
    protocol::MessageWriter(out).begin(type).end();
    return out;
}

}  // namespace

ParseAction StatementTranslator::decide_parse(const protocol::ParseMessage& parse) const {
    const auto byte_limit = static_cast<std::size_t>(config_.max_prepared_statement_bytes);
    const std::size_t bytes = parse.query.size() + parse.parameter_types.size();
    ParseFacts facts;
    facts.translates = server_.link().translates_statements();
    facts.count_full = names_.size() >= kMaxClientStatements;
    facts.bytes_full = names_.bytes() + bytes > byte_limit;
    // Looked up only where the answer matters (it usually does not without translation).
    facts.name_known = (facts.translates || facts.count_full) && names_.find(parse.statement);
    facts.reserved_name = is_reserved_statement_name(parse.statement);
    facts.process_full = client_statement_bytes_in_process() + bytes >
                         static_cast<std::size_t>(config_.max_prepared_statement_bytes_total);
    return pgtether::decide_parse(facts);
}

void StatementTranslator::remember(std::string_view name, StatementPtr statement) {
    names_.add(name, std::move(statement));
}

void StatementTranslator::refuse_parse(ParseAction action, std::string_view name) {
    if (action == ParseAction::RefuseDuplicate) {
        // PgBouncer's words (it closes the client; pgtether answers as PostgreSQL does, 42P05).
        spdlog::info("{}: prepared statement '{}' was already prepared", server_.describe(),
                     name);
    }
    const int limit = action == ParseAction::RefuseProcessFull
                          ? config_.max_prepared_statement_bytes_total
                          : config_.max_prepared_statement_bytes;
    Refusal refusal = parse_refusal(action, name, static_cast<std::size_t>(limit));
    answer(QueuedRequest::Kind::Answered, fe::kParse,
           error_message(refusal.sqlstate, std::move(refusal.message)));
}

void StatementTranslator::translate_parse(std::string_view name, StatementPtr statement) {
    names_.add(name, statement);
    server_.pool().stats().client_parse_count++;
    // Prepared afresh even where the backend has it already (for another client): a Parse plans
    // the query in the client's own session, as on a direct connection. The copy on the backend
    // was planned in another client's session, perhaps against its temporary table of the same
    // name ("cached plan must not change result type" where PostgreSQL would succeed).
    if (server_.statements().contains(*statement)) server_.statements().mark_stale(statement);
    write_server_parse(statement);
    server_.link().requests().push({fe::kParse,
                             QueuedRequest::Kind::Forwarded,
                             QueuedRequest::kUndoClientAdd | QueuedRequest::kUndoServerAdd,
                             {},
                             std::string(name),
                             std::move(statement)});
}

StatementTranslator::Routed StatementTranslator::bind(const protocol::BindNames& names,
                                                      const StatementPtr& statement, ByteSpan body,
                                                      std::size_t body_missing) {
    if (names.statement.empty()) return Routed::AsSent;  // the backend's own unnamed statement
    const UseAction action = decide_use_of(statement, names.statement);
    if (action == UseAction::ForwardAsSent) return Routed::AsSent;
    if (action == UseAction::RefuseReservedName) {
        refuse_reserved(fe::kBind, names.statement);
        return Routed::Refused;
    }
    ensure_prepared(action, statement);
    server_.pool().stats().bind_count++;
    // Same Bind, with the backend's name for the statement; the parameters are copied as sent.
    std::size_t names_length = names.portal.size() + 1 + names.statement.size() + 1;
    std::string rewritten;
    protocol::MessageWriter(rewritten)
        .begin(fe::kBind)
        .cstring(names.portal)
        .cstring(statement->server_name)
        .bytes(body.subspan(names_length))
        .end(body_missing);
    out_.add_owned(std::move(rewritten));
    server_.link().tracker().on_frontend(fe::kBind);
    server_.link().requests().push(
        {fe::kBind, QueuedRequest::Kind::Forwarded, QueuedRequest::kUndoNone, {}, {}, statement});
    return Routed::Rewritten;
}

StatementTranslator::Routed StatementTranslator::describe_or_close(ByteSpan body, char type) {
    auto target = protocol::parse_describe_or_close(body);
    if (!target || target->kind != 'S' || target->name.empty()) return Routed::AsSent;
    if (type == fe::kClose) {
        switch (decide_close(server_.link().translates_statements(),
                             is_reserved_statement_name(target->name))) {
            case CloseAction::RefuseReservedName:
                refuse_reserved(fe::kClose, target->name);
                return Routed::Refused;
            case CloseAction::ForwardForget:
                names_.remove(target->name);
                return Routed::AsSent;
            case CloseAction::AnswerCloseComplete: {
                std::string name(target->name);
                StatementPtr removed = names_.remove(name);
                server_.link().requests().push(
                    {fe::kClose, QueuedRequest::Kind::Answered,
                     removed ? QueuedRequest::kUndoClientRemove : QueuedRequest::kUndoNone,
                     simple_message(protocol::be::kCloseComplete), std::move(name), removed});
                server_.settle_requests();
                return Routed::Rewritten;
            }
        }
    }
    if (!server_.link().translates_statements()) return Routed::AsSent;
    StatementPtr statement = names_.find(target->name);
    const UseAction action = decide_use_of(statement, target->name);
    if (action == UseAction::ForwardAsSent) return Routed::AsSent;
    if (action == UseAction::RefuseReservedName) {
        refuse_reserved(fe::kDescribe, target->name);
        return Routed::Refused;
    }
    ensure_prepared(action, statement);
    std::string rewritten;
    protocol::MessageWriter(rewritten)
        .begin(fe::kDescribe)
        .u8('S')
        .cstring(statement->server_name)
        .end();
    out_.add_owned(std::move(rewritten));
    server_.link().tracker().on_frontend(fe::kDescribe);
    server_.link().requests().push({fe::kDescribe, QueuedRequest::Kind::Forwarded,
                             QueuedRequest::kUndoNone, {}, {}, statement});
    return Routed::Rewritten;
}

void StatementTranslator::refuse_reserved(char type, std::string_view name) {
    Refusal refusal = reserved_name_refusal(name);
    answer(QueuedRequest::Kind::Answered, type,
           error_message(refusal.sqlstate, std::move(refusal.message)));
}

void StatementTranslator::answer(QueuedRequest::Kind kind, char type, std::string reply) {
    server_.link().requests().push({type, kind, QueuedRequest::kUndoNone, std::move(reply), {}, {}});
    server_.settle_requests();
}

UseAction StatementTranslator::decide_use_of(const StatementPtr& statement,
                                             std::string_view name) const {
    UseFacts facts;
    facts.reserved_name = is_reserved_statement_name(name);
    facts.translates = server_.link().translates_statements();
    facts.name_known = statement != nullptr;
    facts.text_withheld = statement && statement->text_withheld;
    facts.on_backend = facts.translates && facts.name_known && !facts.text_withheld &&
                       server_.statements().contains(*statement);
    return decide_use(facts);
}

void StatementTranslator::ensure_prepared(UseAction action, const StatementPtr& statement) {
    if (action == UseAction::Rewrite) {
        server_.statements().touch(*statement);
        return;
    }
    write_server_parse(statement);
    server_.link().requests().push({fe::kParse,
                             QueuedRequest::Kind::Injected,
                             QueuedRequest::kUndoServerAdd,
                             {},
                             {},
                             statement});
}

void StatementTranslator::make_room_for(const StatementPtr& statement) {
    auto capacity = static_cast<std::size_t>(config_.max_prepared_statements);
    auto& on_server = server_.statements();
    for (auto& old :
         on_server.add(statement, capacity, server_.link().requests().pinned_statements(),
                       static_cast<std::size_t>(config_.max_prepared_statement_bytes))) {
        close_on_server(old, QueuedRequest::kUndoServerRemove);
    }
    for (auto& old : on_server.trim_stale(capacity)) {
        close_on_server(old, QueuedRequest::kUndoServerStale);
    }
}

void StatementTranslator::close_on_server(const StatementPtr& statement, std::uint8_t undo) {
    std::string close;
    protocol::MessageWriter(close).begin(fe::kClose).u8('S').cstring(statement->server_name).end();
    out_.add_owned(std::move(close));
    server_.link().tracker().on_frontend(fe::kClose);
    server_.link().requests().push({fe::kClose, QueuedRequest::Kind::Injected, undo, {}, {}, statement});
}

void StatementTranslator::write_server_parse(const StatementPtr& statement) {
    make_room_for(statement);
    // A stale copy under the same name goes first (ServerStatements::mark_stale).
    if (server_.statements().take_stale(*statement)) {
        close_on_server(statement, QueuedRequest::kUndoServerStale);
    }
    std::string parse;
    protocol::MessageWriter(parse)
        .begin(fe::kParse)
        .cstring(statement->server_name)
        .cstring(statement->query)
        .bytes(statement->parameter_types)
        .end();
    out_.add_owned(std::move(parse));
    server_.link().tracker().on_frontend(fe::kParse);
    server_.pool().stats().server_parse_count++;
}

}  // namespace pgtether
