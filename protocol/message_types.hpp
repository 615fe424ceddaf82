// Message type bytes of protocol 3.0 (PostgreSQL docs §55.7 "Message Formats").
#pragma once

namespace pgtether::protocol {

// Sent by the client (frontend).
namespace fe {
inline constexpr char kBind = 'B';
inline constexpr char kClose = 'C';
inline constexpr char kCopyData = 'd';
inline constexpr char kCopyDone = 'c';
inline constexpr char kCopyFail = 'f';
inline constexpr char kDescribe = 'D';
inline constexpr char kExecute = 'E';
inline constexpr char kFlush = 'H';
inline constexpr char kFunctionCall = 'F';
inline constexpr char kParse = 'P';
inline constexpr char kPassword = 'p';  // also SASLInitialResponse, SASLResponse, GSSResponse
inline constexpr char kQuery = 'Q';
inline constexpr char kSync = 'S';
inline constexpr char kTerminate = 'X';
}  // namespace fe

// Sent by the server (backend).
namespace be {
inline constexpr char kAuthentication = 'R';
inline constexpr char kBackendKeyData = 'K';
inline constexpr char kBindComplete = '2';
inline constexpr char kCloseComplete = '3';
inline constexpr char kCommandComplete = 'C';
inline constexpr char kCopyData = 'd';
inline constexpr char kCopyDone = 'c';
inline constexpr char kCopyInResponse = 'G';
inline constexpr char kCopyOutResponse = 'H';
inline constexpr char kCopyBothResponse = 'W';
inline constexpr char kDataRow = 'D';
inline constexpr char kEmptyQueryResponse = 'I';
inline constexpr char kErrorResponse = 'E';
inline constexpr char kFunctionCallResponse = 'V';
inline constexpr char kNegotiateProtocolVersion = 'v';
inline constexpr char kNoData = 'n';
inline constexpr char kNoticeResponse = 'N';
inline constexpr char kNotificationResponse = 'A';
inline constexpr char kParameterDescription = 't';
inline constexpr char kParameterStatus = 'S';
inline constexpr char kParseComplete = '1';
inline constexpr char kPortalSuspended = 's';
inline constexpr char kReadyForQuery = 'Z';
inline constexpr char kRowDescription = 'T';
}  // namespace be

// Authentication request codes carried in an 'R' message.
enum class AuthRequest : int {
    Ok = 0,
    KerberosV5 = 2,
    CleartextPassword = 3,
    Md5Password = 5,
    Gss = 7,
    GssContinue = 8,
    Sspi = 9,
    Sasl = 10,
    SaslContinue = 11,
    SaslFinal = 12,
};

// Transaction status in ReadyForQuery.
inline constexpr char kTxIdle = 'I';
inline constexpr char kTxInBlock = 'T';
inline constexpr char kTxFailed = 'E';

}  // namespace pgtether::protocol
