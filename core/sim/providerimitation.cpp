#include "sim/providerimitation.h"

#include "partners/partnerevents.h"

#include <QCryptographicHash>
#include <QDateTime>
#include <QTimeZone>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QUrl>
#include <QUrlQuery>

namespace once {

QByteArray SimRequest::header(QByteArrayView name) const
{
    for (const auto &h : headers) {
        if (h.first.compare(name, Qt::CaseInsensitive) == 0)
            return h.second;
    }
    return {};
}

namespace {

QByteArray json(const QJsonObject &object)
{
    return QJsonDocument(object).toJson(QJsonDocument::Compact);
}

QJsonObject jsonBody(const SimRequest &request, bool *ok)
{
    QJsonParseError error;
    const QJsonDocument document = QJsonDocument::fromJson(request.body, &error);
    *ok = error.error == QJsonParseError::NoError && document.isObject();
    return document.object();
}

QString queryValue(const SimRequest &request, const QString &name)
{
    return QUrlQuery(QString::fromLatin1(request.query)).queryItemValue(name, QUrl::FullyDecoded);
}

// Any non-empty credential when none is expected, else exactly the expected one.
bool credentialPasses(const QByteArray &given, const QByteArray &expected)
{
    return expected.isEmpty() ? !given.isEmpty() : given == expected;
}

QByteArray bearerOf(const SimRequest &request)
{
    const QByteArray authorization = request.header("authorization");
    return authorization.startsWith("Bearer ") ? authorization.mid(7).trimmed() : QByteArray();
}

// A stable, made-up UUID for message n, as Resend and Postmark ids look.
QByteArray uuidOf(const QByteArray &n)
{
    return "00000000-0000-4000-8000-" + n.rightJustified(12, '0');
}

QString isoTime(qint64 ms)
{
    return QDateTime::fromMSecsSinceEpoch(ms, QTimeZone::utc()).toString(Qt::ISODateWithMs);
}

// Today's partner: the reminder JSON at POST /reminders, Idempotency-Key honoured (unless
// the simulator is told otherwise), a bearer token checked only when one is expected.
class WebhookImitation final : public ProviderImitation
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("webhook"); }
    QString sendHelp() const override { return QStringLiteral("POST /reminders"); }
    bool idempotent() const override { return true; }
    bool isSend(const SimRequest &request) const override { return request.path == "/reminders"; }
    bool isLookup(const SimRequest &request) const override
    {
        return request.method == "GET" && request.path.startsWith("/reminders/") && request.path.size() > 11;
    }
    std::optional<SimAnswer> refuseCredentials(const SimRequest &request,
                                               const QByteArray &token) const override
    {
        // Suites that predate tokens send none: only an expected token is checked.
        if (token.isEmpty() || bearerOf(request) == token)
            return std::nullopt;
        return failure(401, "invalid or expired token");
    }
    std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const override
    {
        QJsonParseError parseError;
        QJsonDocument::fromJson(request.body, &parseError);
        if (parseError.error != QJsonParseError::NoError)
            return failure(400, "body is not valid JSON");
        const QByteArray key = request.header("idempotency-key");
        return SimSend{key, key};
    }
    SimAnswer accepted(const QByteArray &n, const SimRequest &) const override
    {
        return {200, R"({"id":"msg_)" + n + R"(","request_id":"req_)" + n + R"(","status":"accepted"})",
                "X-Request-Id: req_" + n + "\r\n"};
    }
    SimAnswer failure(int status, const QByteArray &message) const override
    {
        return {status, json(QJsonObject{{QStringLiteral("error"), QString::fromUtf8(message)}})};
    }
    SimAnswer keyInProgress() const override
    {
        return failure(409, "a request with this Idempotency-Key is in progress");
    }
    SimAnswer keyReused() const override
    {
        return failure(422, "Idempotency-Key reused with a different body");
    }
    QByteArray lookupKey(const SimRequest &request) const override
    {
        return QByteArray::fromPercentEncoding(request.path.mid(11));
    }
    SimAnswer lookupAnswer(const QByteArray &n) const override
    {
        if (n.isEmpty())
            return failure(404, "not found");
        return {200, R"({"id":"msg_)" + n + R"(","status":"accepted"})"};
    }
    std::optional<SimEvent> deliveryEvent(const QByteArray &n, const SimRequest &send, bool bounce,
                                          qint64 nowMs) const override
    {
        const QJsonObject event{{QStringLiteral("key"), QString::fromUtf8(send.header("idempotency-key"))},
                                {QStringLiteral("kind"), bounce ? QStringLiteral("bounced") : QStringLiteral("delivered")},
                                {QStringLiteral("id"), QString::fromLatin1("ev_" + n)},
                                {QStringLiteral("at"), isoTime(nowMs)},
                                {QStringLiteral("message_id"), QString::fromLatin1("msg_" + n)}};
        SimEvent posted;
        posted.body = json(QJsonObject{{QStringLiteral("events"), QJsonArray{event}}});
        return posted;
    }
    void signEvent(SimEvent &event, const QByteArray &, const QByteArray &secret, qint64 nowMs) const override
    {
        event.headers.append({"Once-Signature", eventsignatures::onceSignature(secret, nowMs / 1000, event.body)});
    }
};

// resend.com/docs/api-reference/emails/send-email, .../errors, dashboard/emails/idempotency-keys.
class ResendImitation final : public ProviderImitation
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("resend"); }
    QString sendHelp() const override { return QStringLiteral("POST /emails"); }
    bool idempotent() const override { return true; }
    // "Idempotency keys expire after 24 hours" (dashboard/emails/idempotency-keys).
    qint64 keyWindowMs() const override { return 24 * 3600 * 1000; }
    bool isSend(const SimRequest &request) const override { return request.path == "/emails"; }
    std::optional<SimAnswer> refuseCredentials(const SimRequest &request,
                                               const QByteArray &token) const override
    {
        const QByteArray given = bearerOf(request);
        if (given.isEmpty())
            return named(401, "missing_api_key", "Missing API key in the authorization header.");
        if (!credentialPasses(given, token))
            return named(403, "invalid_api_key", "API key is invalid.");
        return std::nullopt;
    }
    std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const override
    {
        const QByteArray key = request.header("idempotency-key");
        if (key.size() > 256)
            return named(400, "invalid_idempotency_key", "The key must be between 1-256 chars.");
        bool ok = false;
        const QJsonObject body = jsonBody(request, &ok);
        if (!ok)
            return named(422, "validation_error", "Invalid JSON body.");
        const QJsonValue to = body.value(QLatin1String("to"));
        const QString first = to.isArray() ? to.toArray().first().toString() : to.toString();
        for (const char *field : {"from", "subject"}) {
            if (body.value(QLatin1String(field)).toString().isEmpty())
                return named(422, "missing_required_field", QByteArray("Missing `") + field + "` field.");
        }
        if (!first.contains(QLatin1Char('@')))
            return named(422, "validation_error", "Invalid `to` field.");
        if (body.value(QLatin1String("text")).toString().isEmpty() &&
            body.value(QLatin1String("html")).toString().isEmpty())
            return named(422, "missing_required_field", "Missing `text` or `html` field.");
        for (const QJsonValue &tag : body.value(QLatin1String("tags")).toArray()) {
            const QString value = tag.toObject().value(QLatin1String("value")).toString();
            static const QRegularExpression allowed(QStringLiteral("^[A-Za-z0-9_-]{1,256}$"));
            if (!allowed.match(value).hasMatch())
                return named(422, "validation_error",
                             "Tags should only contain ASCII letters, numbers, underscores, or dashes.");
        }
        const QByteArray effect =
            key.isEmpty() ? first.toUtf8() + '|' + body.value(QLatin1String("text")).toString().toUtf8()
                          : key;
        return SimSend{effect, key};
    }
    SimAnswer accepted(const QByteArray &n, const SimRequest &) const override
    {
        return {200, R"({"id":")" + uuidOf(n) + R"("})"};
    }
    // resend.com/docs/dashboard/webhooks/event-types: {type, created_at, data}.
    std::optional<SimEvent> deliveryEvent(const QByteArray &n, const SimRequest &send, bool bounce,
                                          qint64 nowMs) const override
    {
        bool ok = false;
        const QJsonObject request = jsonBody(send, &ok);
        QJsonObject tags;
        for (const QJsonValue &tag : request.value(QLatin1String("tags")).toArray())
            tags.insert(tag.toObject().value(QLatin1String("name")).toString(), tag.toObject().value(QLatin1String("value")));
        QJsonObject data{{QStringLiteral("email_id"), QString::fromLatin1(uuidOf(n))},
                         {QStringLiteral("created_at"), isoTime(nowMs)},
                         {QStringLiteral("from"), request.value(QLatin1String("from"))},
                         {QStringLiteral("to"), request.value(QLatin1String("to"))},
                         {QStringLiteral("subject"), request.value(QLatin1String("subject"))},
                         {QStringLiteral("tags"), tags}};
        if (bounce)
            data.insert(QStringLiteral("bounce"),
                        QJsonObject{{QStringLiteral("type"), QStringLiteral("Permanent")},
                                    {QStringLiteral("message"), QStringLiteral("The recipient's mailbox does not exist.")}});
        SimEvent event;
        event.body = json(QJsonObject{{QStringLiteral("type"), bounce ? QStringLiteral("email.bounced") : QStringLiteral("email.delivered")},
                                      {QStringLiteral("created_at"), isoTime(nowMs)},
                                      {QStringLiteral("data"), data}});
        event.headers.append({"svix-id", "msg_" + n + (bounce ? "b" : "d")});
        return event;
    }
    void signEvent(SimEvent &event, const QByteArray &, const QByteArray &secret, qint64 nowMs) const override
    {
        const QByteArray timestamp = QByteArray::number(nowMs / 1000);
        const QByteArray id = event.headers.constFirst().second;
        event.headers.append({"svix-timestamp", timestamp});
        event.headers.append({"svix-signature",
                              eventsignatures::svixSignature(eventsignatures::svixKey(secret).value_or(secret), id,
                                                             timestamp, event.body)});
    }
    SimAnswer failure(int status, const QByteArray &message) const override
    {
        const char *name = status == 429   ? "rate_limit_exceeded"
                           : status >= 500 ? "application_error"
                                           : "validation_error";
        return named(status, name, message);
    }
    SimAnswer keyInProgress() const override
    {
        return named(409, "concurrent_idempotent_requests",
                     "Same idempotency key used while original request is still in progress.");
    }
    SimAnswer keyReused() const override
    {
        return named(409, "invalid_idempotent_request",
                     "Same idempotency key used with a different request payload.");
    }

private:
    static SimAnswer named(int status, const char *name, const QByteArray &message)
    {
        return {status, json(QJsonObject{{QStringLiteral("statusCode"), status},
                                         {QStringLiteral("name"), QLatin1String(name)},
                                         {QStringLiteral("message"), QString::fromUtf8(message)}})};
    }
};

// postmarkapp.com/developer/api/email-api, .../messages-api, .../overview#error-codes.
class PostmarkImitation final : public ProviderImitation
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("postmark"); }
    QString sendHelp() const override { return QStringLiteral("POST /email"); }
    bool isSend(const SimRequest &request) const override { return request.path == "/email"; }
    bool isLookup(const SimRequest &request) const override
    {
        return request.method == "GET" && request.path == "/messages/outbound";
    }
    std::optional<SimAnswer> refuseCredentials(const SimRequest &request,
                                               const QByteArray &token) const override
    {
        const QByteArray given = request.header("x-postmark-server-token");
        if (given.isEmpty())
            return coded(401, 10, "No Account or Server API tokens were supplied in the HTTP headers.");
        if (!credentialPasses(given, token))
            return coded(
                401, 10,
                "The Server Token you provided in the X-Postmark-Server-Token request header was invalid.");
        return std::nullopt;
    }
    std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const override
    {
        bool ok = false;
        const QJsonObject body = jsonBody(request, &ok);
        if (!ok)
            return coded(422, 402, "Received invalid JSON input.");
        const QString to = body.value(QLatin1String("To")).toString();
        if (body.value(QLatin1String("From")).toString().isEmpty())
            return coded(422, 300, "Invalid 'From' address: ''.");
        if (!to.contains(QLatin1Char('@')))
            return coded(422, 300, "Error parsing 'To': Illegal email address '" + to.toUtf8() + "'.");
        if (body.value(QLatin1String("TextBody")).toString().isEmpty() &&
            body.value(QLatin1String("HtmlBody")).toString().isEmpty())
            return coded(422, 300, "Provide either email TextBody or HtmlBody or both.");
        const QJsonObject metadata = body.value(QLatin1String("Metadata")).toObject();
        if (metadata.size() > 10)
            return coded(422, 300, "Metadata may hold at most 10 fields.");
        for (auto it = metadata.begin(); it != metadata.end(); ++it) {
            if (it.key().size() > 20 || it.value().toString().size() > 80)
                return coded(422, 300, "Metadata field names are limited to 20 characters and values to 80.");
        }
        const QByteArray key = metadata.value(QLatin1String("once_key")).toString().toUtf8();
        return SimSend{key.isEmpty()
                           ? to.toUtf8() + '|' + body.value(QLatin1String("TextBody")).toString().toUtf8()
                           : key,
                       {}};
    }
    SimAnswer accepted(const QByteArray &n, const SimRequest &request) const override
    {
        bool ok = false;
        const QJsonObject body = jsonBody(request, &ok);
        return {200, json(QJsonObject{{QStringLiteral("To"), body.value(QLatin1String("To"))},
                                      {QStringLiteral("SubmittedAt"), QStringLiteral("2026-12-06T10:00:00Z")},
                                      {QStringLiteral("MessageID"), QString::fromLatin1(uuidOf(n))},
                                      {QStringLiteral("ErrorCode"), 0},
                                      {QStringLiteral("Message"), QStringLiteral("OK")}})};
    }
    SimAnswer failure(int status, const QByteArray &message) const override
    {
        return coded(status, status == 401 ? 10 : 0, message);
    }
    // postmarkapp.com/developer/webhooks/delivery-webhook and .../bounce-webhook.
    std::optional<SimEvent> deliveryEvent(const QByteArray &n, const SimRequest &send, bool bounce,
                                          qint64 nowMs) const override
    {
        bool ok = false;
        const QJsonObject request = jsonBody(send, &ok);
        QJsonObject record{{QStringLiteral("MessageID"), QString::fromLatin1(uuidOf(n))},
                           {QStringLiteral("MessageStream"), request.value(QLatin1String("MessageStream"))},
                           {QStringLiteral("Metadata"), request.value(QLatin1String("Metadata"))},
                           {QStringLiteral("ServerID"), 1},
                           {QStringLiteral("Tag"), QString()}};
        if (bounce) {
            record.insert(QStringLiteral("RecordType"), QStringLiteral("Bounce"));
            record.insert(QStringLiteral("ID"), n.toLongLong());
            record.insert(QStringLiteral("Type"), QStringLiteral("HardBounce"));
            record.insert(QStringLiteral("TypeCode"), 1);
            record.insert(QStringLiteral("Email"), request.value(QLatin1String("To")));
            record.insert(QStringLiteral("BouncedAt"), isoTime(nowMs));
            record.insert(QStringLiteral("Description"),
                          QStringLiteral("The server was unable to deliver your message (ex: unknown user, mailbox not found)."));
        } else {
            record.insert(QStringLiteral("RecordType"), QStringLiteral("Delivery"));
            record.insert(QStringLiteral("Recipient"), request.value(QLatin1String("To")));
            record.insert(QStringLiteral("DeliveredAt"), isoTime(nowMs));
            record.insert(QStringLiteral("Details"), QStringLiteral("smtp;250 2.0.0 OK"));
        }
        SimEvent event;
        event.body = json(record);
        return event;
    }
    // Postmark signs nothing: the webhook URL's user and password come as basic auth.
    void signEvent(SimEvent &event, const QByteArray &, const QByteArray &secret, qint64) const override
    {
        event.headers.append({"Authorization", "Basic " + secret.toBase64()});
    }
    QByteArray lookupKey(const SimRequest &request) const override
    {
        return queryValue(request, QStringLiteral("metadata_once_key")).toUtf8();
    }
    SimAnswer lookupAnswer(const QByteArray &n) const override
    {
        QJsonArray messages;
        if (!n.isEmpty())
            messages.append(QJsonObject{{QStringLiteral("MessageID"), QString::fromLatin1(uuidOf(n))},
                                        {QStringLiteral("Status"), QStringLiteral("Sent")}});
        return {200, json(QJsonObject{{QStringLiteral("TotalCount"), messages.size()},
                                      {QStringLiteral("Messages"), messages}})};
    }

private:
    static SimAnswer coded(int status, int errorCode, const QByteArray &message)
    {
        return {status, json(QJsonObject{{QStringLiteral("ErrorCode"), errorCode},
                                         {QStringLiteral("Message"), QString::fromUtf8(message)}})};
    }
};

// twilio.com/docs/sendgrid/api-reference/mail-send, .../email-activity.
class SendgridImitation final : public ProviderImitation
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("sendgrid"); }
    QString sendHelp() const override { return QStringLiteral("POST /v3/mail/send"); }
    bool isSend(const SimRequest &request) const override { return request.path == "/v3/mail/send"; }
    bool isLookup(const SimRequest &request) const override
    {
        return request.method == "GET" && request.path == "/v3/messages";
    }
    std::optional<SimAnswer> refuseCredentials(const SimRequest &request,
                                               const QByteArray &token) const override
    {
        if (!credentialPasses(bearerOf(request), token))
            return failure(401, "The provided authorization grant is invalid, expired, or revoked");
        return std::nullopt;
    }
    std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const override
    {
        bool ok = false;
        const QJsonObject body = jsonBody(request, &ok);
        if (!ok)
            return field(400, "Bad Request", {});
        const QString to = body.value(QLatin1String("personalizations"))
                               .toArray()
                               .first()
                               .toObject()
                               .value(QLatin1String("to"))
                               .toArray()
                               .first()
                               .toObject()
                               .value(QLatin1String("email"))
                               .toString();
        if (!to.contains(QLatin1Char('@')))
            return field(400, "Does not contain a valid address.", "personalizations.0.to.0.email");
        if (!body.value(QLatin1String("from"))
                 .toObject()
                 .value(QLatin1String("email"))
                 .toString()
                 .contains(QLatin1Char('@')))
            return field(400, "The from object must be provided for every email send.", "from");
        if (body.value(QLatin1String("subject")).toString().isEmpty())
            return field(400, "The subject is required.", "subject");
        const QString text = body.value(QLatin1String("content"))
                                 .toArray()
                                 .first()
                                 .toObject()
                                 .value(QLatin1String("value"))
                                 .toString();
        if (text.isEmpty())
            return field(400, "Unless a valid template_id is provided, the content parameter is required.",
                         "content");
        const QByteArray key = body.value(QLatin1String("custom_args"))
                                   .toObject()
                                   .value(QLatin1String("once_key"))
                                   .toString()
                                   .toUtf8();
        return SimSend{key.isEmpty() ? to.toUtf8() + '|' + text.toUtf8() : key, {}};
    }
    SimAnswer accepted(const QByteArray &n, const SimRequest &) const override
    {
        return {202, {}, "X-Message-Id: sg" + n.rightJustified(20, '0') + "\r\n"};
    }
    // twilio.com/docs/sendgrid/for-developers/tracking-events/event: an array of events,
    // the custom_args at each one's top level.
    std::optional<SimEvent> deliveryEvent(const QByteArray &n, const SimRequest &send, bool bounce,
                                          qint64 nowMs) const override
    {
        bool ok = false;
        const QJsonObject request = jsonBody(send, &ok);
        QJsonObject event{{QStringLiteral("email"), request.value(QLatin1String("personalizations")).toArray().first()
                                                        .toObject().value(QLatin1String("to")).toArray().first()
                                                        .toObject().value(QLatin1String("email"))},
                          {QStringLiteral("timestamp"), nowMs / 1000},
                          {QStringLiteral("event"), bounce ? QStringLiteral("bounce") : QStringLiteral("delivered")},
                          {QStringLiteral("sg_event_id"), QString::fromLatin1("sgev" + n + (bounce ? "b" : "d"))},
                          {QStringLiteral("sg_message_id"),
                           QString::fromLatin1("sg" + n.rightJustified(20, '0') + ".filterdrecv-1-0")}};
        const QJsonObject custom = request.value(QLatin1String("custom_args")).toObject();
        for (auto it = custom.begin(); it != custom.end(); ++it)
            event.insert(it.key(), it.value());
        event.insert(bounce ? QStringLiteral("reason") : QStringLiteral("response"),
                     bounce ? QStringLiteral("550 5.1.1 The email account does not exist.") : QStringLiteral("250 OK"));
        SimEvent posted;
        posted.body = QJsonDocument(QJsonArray{event}).toJson(QJsonDocument::Compact);
        return posted;
    }
    void signEvent(SimEvent &event, const QByteArray &, const QByteArray &secret, qint64 nowMs) const override
    {
        const QByteArray timestamp = QByteArray::number(nowMs / 1000);
        event.headers.append({"X-Twilio-Email-Event-Webhook-Timestamp", timestamp});
        event.headers.append({"X-Twilio-Email-Event-Webhook-Signature", eventsignatures::ecdsaSign(secret, timestamp + event.body)});
    }
    SimAnswer failure(int status, const QByteArray &message) const override
    {
        return field(status, message, {});
    }
    QByteArray lookupKey(const SimRequest &request) const override
    {
        // unique_args['once_key']="VALUE"
        static const QRegularExpression pattern(
            QStringLiteral(R"re(^unique_args\['once_key'\]="([^"]*)"$)re"));
        const auto match = pattern.match(queryValue(request, QStringLiteral("query")));
        return match.hasMatch() ? match.captured(1).toUtf8() : QByteArray();
    }
    SimAnswer lookupAnswer(const QByteArray &n) const override
    {
        QJsonArray messages;
        if (!n.isEmpty())
            messages.append(
                QJsonObject{{QStringLiteral("msg_id"), QString::fromLatin1("sg" + n.rightJustified(20, '0'))},
                            {QStringLiteral("status"), QStringLiteral("delivered")}});
        return {200, json(QJsonObject{{QStringLiteral("messages"), messages}})};
    }

private:
    static SimAnswer field(int status, const QByteArray &message, const QByteArray &name)
    {
        return {status,
                json(QJsonObject{{QStringLiteral("errors"),
                                  QJsonArray{QJsonObject{
                                      {QStringLiteral("message"), QString::fromUtf8(message)},
                                      {QStringLiteral("field"),
                                       name.isEmpty() ? QJsonValue() : QJsonValue(QString::fromUtf8(name))},
                                      {QStringLiteral("help"), QJsonValue()}}}}})};
    }
};

// twilio.com/docs/messaging/api/message-resource, twilio.com/docs/api/errors.
class TwilioImitation final : public ProviderImitation
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("twilio"); }
    QString sendHelp() const override
    {
        return QStringLiteral("POST /2010-04-01/Accounts/{AccountSid}/Messages.json");
    }
    bool isSend(const SimRequest &request) const override
    {
        return request.path.startsWith("/2010-04-01/Accounts/") && request.path.endsWith("/Messages.json");
    }
    std::optional<SimAnswer> refuseCredentials(const SimRequest &request,
                                               const QByteArray &token) const override
    {
        const QByteArray account = accountOf(request);
        const QByteArray authorization = request.header("authorization");
        const QByteArray pair = authorization.startsWith("Basic ")
                                    ? QByteArray::fromBase64(authorization.mid(6).trimmed())
                                    : QByteArray();
        const qsizetype colon = pair.indexOf(':');
        if (colon <= 0 || pair.left(colon) != account || !credentialPasses(pair.mid(colon + 1), token))
            return coded(401, 20003, "Authentication Error - invalid username");
        return std::nullopt;
    }
    std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const override
    {
        if (!request.header("content-type").startsWith("application/x-www-form-urlencoded"))
            return coded(400, 21609, "Invalid content type: expected application/x-www-form-urlencoded");
        const QUrlQuery form(QString::fromUtf8(QByteArray(request.body).replace('+', ' ')));
        const QString to = form.queryItemValue(QStringLiteral("To"), QUrl::FullyDecoded);
        const QString from = form.queryItemValue(QStringLiteral("From"), QUrl::FullyDecoded);
        const QString body = form.queryItemValue(QStringLiteral("Body"), QUrl::FullyDecoded);
        static const QRegularExpression number(QStringLiteral(R"(^\+[1-9]\d{6,14}$)"));
        if (to.isEmpty())
            return coded(400, 21604, "A 'To' phone number is required.");
        if (!number.match(to).hasMatch())
            return coded(400, 21211, "The 'To' number " + to.toUtf8() + " is not a valid phone number.");
        if (from.isEmpty())
            return coded(400, 21603, "A 'From' phone number is required.");
        if (body.isEmpty())
            return coded(400, 21602, "Message body is required.");
        return SimSend{to.toUtf8() + '|' + body.toUtf8(), {}};
    }
    SimAnswer accepted(const QByteArray &n, const SimRequest &request) const override
    {
        const QUrlQuery form(QString::fromUtf8(QByteArray(request.body).replace('+', ' ')));
        return {201,
                json(QJsonObject{
                    {QStringLiteral("sid"), QString::fromLatin1("SM" + n.rightJustified(32, '0'))},
                    {QStringLiteral("account_sid"), QString::fromUtf8(accountOf(request))},
                    {QStringLiteral("to"), form.queryItemValue(QStringLiteral("To"), QUrl::FullyDecoded)},
                    {QStringLiteral("status"), QStringLiteral("queued")}})};
    }
    // twilio.com/docs/messaging/guides/track-outbound-message-status: a form POST to the
    // send's StatusCallback (its query kept), MessageSid and MessageStatus.
    std::optional<SimEvent> deliveryEvent(const QByteArray &n, const SimRequest &send, bool bounce,
                                          qint64) const override
    {
        const QUrlQuery form(QString::fromUtf8(QByteArray(send.body).replace('+', ' ')));
        const QUrl callback(form.queryItemValue(QStringLiteral("StatusCallback"), QUrl::FullyDecoded));
        const auto field = [](const char *name, const QByteArray &value) -> QByteArray {
            return QByteArray(name) + '=' + QUrl::toPercentEncoding(QString::fromUtf8(value));
        };
        SimEvent event;
        event.contentType = "application/x-www-form-urlencoded";
        event.query = callback.query(QUrl::FullyEncoded).toUtf8();
        event.body = field("MessageSid", "SM" + n.rightJustified(32, '0')) + '&' +
                     field("MessageStatus", bounce ? "undelivered" : "delivered") + '&' +
                     field("AccountSid", accountOf(send)) + '&' +
                     field("To", form.queryItemValue(QStringLiteral("To"), QUrl::FullyDecoded).toUtf8()) + '&' +
                     field("From", form.queryItemValue(QStringLiteral("From"), QUrl::FullyDecoded).toUtf8());
        if (bounce)
            event.body += '&' + field("ErrorCode", "30003");
        return event;
    }
    void signEvent(SimEvent &event, const QByteArray &url, const QByteArray &secret, qint64) const override
    {
        event.headers.append({"X-Twilio-Signature", eventsignatures::twilioSignature(secret, url, formFields(event.body))});
    }
    SimAnswer failure(int status, const QByteArray &message) const override
    {
        return coded(status,
                     status == 429   ? 20429
                     : status == 401 ? 20003
                     : status >= 500 ? 20500
                                     : 0,
                     message);
    }

private:
    static QByteArray accountOf(const SimRequest &request)
    {
        const QByteArray between = request.path.mid(21);
        return between.size() > 14 ? QByteArray::fromPercentEncoding(between.chopped(14)) : QByteArray();
    }
    static SimAnswer coded(int status, int code, const QByteArray &message)
    {
        return {status, json(QJsonObject{{QStringLiteral("code"), code},
                                         {QStringLiteral("message"), QString::fromUtf8(message)},
                                         {QStringLiteral("more_info"),
                                          QStringLiteral("https://www.twilio.com/docs/errors/%1").arg(code)},
                                         {QStringLiteral("status"), status}})};
    }
};

// docs.slack.dev/messaging/sending-messages-using-incoming-webhooks (handling errors).
// documentation.mailgun.com: POST /v3/DOMAIN/messages (a form, basic auth api:KEY),
// answered {"id": "<...>", "message": "Queued. Thank you."}; webhooks carry a signature
// object (HMAC-SHA256 of timestamp + token) and event-data with the user-variables.
class MailgunImitation final : public ProviderImitation
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("mailgun"); }
    QString sendHelp() const override { return QStringLiteral("POST /v3/DOMAIN/messages"); }
    bool isSend(const SimRequest &request) const override
    {
        return request.path.startsWith("/v3/") && request.path.endsWith("/messages");
    }
    std::optional<SimAnswer> refuseCredentials(const SimRequest &request, const QByteArray &token) const override
    {
        const QByteArray authorization = request.header("authorization");
        const QByteArray pair =
            authorization.startsWith("Basic ") ? QByteArray::fromBase64(authorization.mid(6).trimmed()) : QByteArray();
        if (!pair.startsWith("api:") || !credentialPasses(pair.mid(4), token))
            return SimAnswer{401, "Forbidden", {}, "text/plain"};
        return std::nullopt;
    }
    std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const override
    {
        if (!request.header("content-type").startsWith("application/x-www-form-urlencoded")
            && !request.header("content-type").startsWith("multipart/form-data"))
            return failure(400, "expected a form");
        const auto fields = formFields(request.body);
        const auto field = [&fields](QByteArrayView name) {
            for (const auto &[key, value] : fields)
                if (key == name)
                    return value;
            return QByteArray();
        };
        if (field("from").isEmpty())
            return failure(400, "from parameter is missing");
        if (!field("to").contains('@'))
            return failure(400, "to parameter is not a valid address. please check documentation");
        if (field("text").isEmpty() && field("html").isEmpty())
            return failure(400, "Need at least one of 'text' or 'html' parameters specified");
        const QByteArray key = field("v:once-send-key");
        return SimSend{key.isEmpty() ? field("to") + '|' + field("text") : key, {}};
    }
    SimAnswer accepted(const QByteArray &n, const SimRequest &request) const override
    {
        return {200, json(QJsonObject{{QStringLiteral("id"), QString::fromLatin1("<" + messageId(n, request) + ">")},
                                      {QStringLiteral("message"), QStringLiteral("Queued. Thank you.")}})};
    }
    SimAnswer failure(int status, const QByteArray &message) const override
    {
        return {status, json(QJsonObject{{QStringLiteral("message"), QString::fromUtf8(message)}})};
    }
    std::optional<SimEvent> deliveryEvent(const QByteArray &n, const SimRequest &send, bool bounce,
                                          qint64 nowMs) const override
    {
        QJsonObject variables;
        for (const auto &[key, value] : formFields(send.body)) {
            if (key.startsWith("v:"))
                variables.insert(QString::fromUtf8(key.mid(2)), QString::fromUtf8(value));
        }
        QJsonObject data{{QStringLiteral("event"), bounce ? QStringLiteral("failed") : QStringLiteral("delivered")},
                         {QStringLiteral("id"), QString::fromLatin1("mgev" + n + (bounce ? "b" : "d"))},
                         {QStringLiteral("timestamp"), double(nowMs) / 1000},
                         {QStringLiteral("message"),
                          QJsonObject{{QStringLiteral("headers"),
                                       QJsonObject{{QStringLiteral("message-id"), QString::fromLatin1(messageId(n, send))}}}}},
                         {QStringLiteral("user-variables"), variables}};
        if (bounce) {
            data.insert(QStringLiteral("severity"), QStringLiteral("permanent"));
            data.insert(QStringLiteral("delivery-status"),
                        QJsonObject{{QStringLiteral("code"), 550},
                                    {QStringLiteral("description"), QStringLiteral("No such user")}});
        }
        SimEvent event;
        // The signature object is filled in by signEvent(); unsigned, it is left out.
        event.body = json(QJsonObject{{QStringLiteral("event-data"), data}});
        return event;
    }
    void signEvent(SimEvent &event, const QByteArray &, const QByteArray &secret, qint64 nowMs) const override
    {
        QJsonObject body = QJsonDocument::fromJson(event.body).object();
        const QByteArray timestamp = QByteArray::number(nowMs / 1000);
        const QByteArray token = QCryptographicHash::hash(QByteArray(event.body + timestamp), QCryptographicHash::Sha256).toHex().left(50);
        body.insert(QStringLiteral("signature"),
                    QJsonObject{{QStringLiteral("timestamp"), QString::fromLatin1(timestamp)},
                                {QStringLiteral("token"), QString::fromLatin1(token)},
                                {QStringLiteral("signature"),
                                 QString::fromLatin1(eventsignatures::hmacSha256(secret, timestamp + token).toHex())}});
        event.body = json(body);
    }

private:
    static QByteArray messageId(const QByteArray &n, const SimRequest &request)
    {
        // /v3/DOMAIN/messages
        const QByteArray domain = request.path.mid(4, request.path.size() - 4 - 9);
        return "sim." + n + '@' + domain;
    }
};

class SlackImitation final : public ProviderImitation
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("slack"); }
    QString sendHelp() const override { return QStringLiteral("POST /services/T.../B.../SECRET"); }
    bool isSend(const SimRequest &request) const override { return request.path.startsWith("/services/"); }
    std::optional<SimAnswer> refuseCredentials(const SimRequest &request,
                                               const QByteArray &token) const override
    {
        // The URL is the credential: its last segment is the secret.
        const QList<QByteArray> segments = request.path.split('/');
        if (segments.size() != 5 || segments.at(2).isEmpty() || segments.at(3).isEmpty())
            return failure(404, "no_service");
        if (!credentialPasses(segments.at(4), token))
            return failure(403, "invalid_token");
        return std::nullopt;
    }
    std::variant<SimSend, SimAnswer> readSend(const SimRequest &request) const override
    {
        bool ok = false;
        const QJsonObject body = jsonBody(request, &ok);
        if (!ok)
            return failure(400, "invalid_payload");
        const QString text = body.value(QLatin1String("text")).toString();
        if (text.isEmpty())
            return failure(400, "no_text");
        return SimSend{text.toUtf8(), {}};
    }
    SimAnswer accepted(const QByteArray &, const SimRequest &) const override
    {
        return {200, "ok", {}, "text/plain"};
    }
    SimAnswer failure(int status, const QByteArray &message) const override
    {
        // Slack answers its webhooks in single plain words.
        QByteArray word = message;
        if (status == 429)
            word = "rate_limited";
        else if (status >= 500)
            word = "service_unavailable";
        else if (status == 401)
            word = "invalid_token";
        return {status, word, {}, "text/plain"};
    }
};

} // namespace

const ProviderImitation *providerImitation(QStringView id)
{
    static const WebhookImitation webhook;
    static const ResendImitation resend;
    static const PostmarkImitation postmark;
    static const SendgridImitation sendgrid;
    static const TwilioImitation twilio;
    static const SlackImitation slack;
    static const MailgunImitation mailgun;
    for (const ProviderImitation *imitation : std::initializer_list<const ProviderImitation *>{
             &webhook, &resend, &postmark, &sendgrid, &mailgun, &twilio, &slack}) {
        if (imitation->id() == id)
            return imitation;
    }
    return nullptr;
}

QStringList providerImitationIds()
{
    return {QStringLiteral("webhook"),  QStringLiteral("resend"),  QStringLiteral("postmark"), QStringLiteral("sendgrid"),
            QStringLiteral("mailgun"),  QStringLiteral("twilio"),  QStringLiteral("slack")};
}

} // namespace once
