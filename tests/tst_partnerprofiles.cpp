// The partner profiles (core/partners/profiles/): the exact request each builds from a
// reminder, what each provider's documented answers mean, long keys as stable digests,
// missing fields, secrets kept out of outcomes, and each profile's requests accepted by
// `once partner-sim --profile NAME`, the imitation of its provider.
#include "deliveryharness.h"

#include "model/reminder.h"
#include "partners/httppartnersender.h"
#include "partners/partnerprofile.h"
#include "partners/partnersettings.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <QUrlQuery>

using namespace once;
using namespace oncetest;

Q_DECLARE_METATYPE(once::SendOutcome::Kind)
Q_DECLARE_METATYPE(once::LookupResult::Kind)
Q_DECLARE_METATYPE(once::HttpHeaders)

namespace {

const QByteArray Token = "tok-S3CRET-value-42";
const QByteArray Account = "AC0123456789abcdef0123456789abcdef";
const QString SlackPath = QStringLiteral("/services/T0SIM/B0SIM/hookS3CRETpath77");
const qint64 Now = 1'780'000'000'000;

const PartnerProfile &profileNamed(const QString &id)
{
    const PartnerProfile *profile = partnerProfile(id);
    Q_ASSERT(profile);
    return *profile;
}

PartnerSettings settingsFor(const QString &id, const QUrl &base = QUrl(QStringLiteral("https://api.example.test")))
{
    PartnerSettings partner;
    partner.name = id;
    partner.profile = id;
    partner.url = base;
    partner.token = Token;
    partner.from = QStringLiteral("reminders@example.test");
    if (id == QLatin1String("twilio")) {
        partner.account = Account;
        partner.from = QStringLiteral("+15550001111");
    } else if (id == QLatin1String("slack")) {
        partner.url.setPath(SlackPath);
        partner.token.clear();
    } else if (id == QLatin1String("webhook")) {
        partner.url.setPath(QStringLiteral("/reminders"));
    } else if (id == QLatin1String("mailgun")) {
        partner.options.insert(QStringLiteral("domain"), QStringLiteral("mg.example.test"));
    }
    return partner;
}

QJsonObject reminderFields(const QString &user = QStringLiteral("u1"))
{
    return QJsonObject{
        {QStringLiteral("user_id"), user},
        {QStringLiteral("reminder_id"), QStringLiteral("r1")},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-07T09:00:00Z")},
        {QStringLiteral("destination"), QStringLiteral("ann@example.test")},
        {QStringLiteral("subject"), QStringLiteral("Dentist")},
        {QStringLiteral("body"), QStringLiteral("Tomorrow at 10:00 & bring the card")},
    };
}

Reminder reminderOf(const QJsonObject &fields)
{
    const auto parsed = parseReminder(QJsonDocument(fields).toJson(QJsonDocument::Compact));
    if (!parsed.reminder)
        qFatal("test reminder refused: %s", qPrintable(parsed.error));
    return *parsed.reminder;
}

Reminder smsReminder(const QString &user = QStringLiteral("u1"))
{
    QJsonObject fields = reminderFields(user);
    fields.insert(QStringLiteral("destination"), QStringLiteral("+15557654321"));
    return reminderOf(fields);
}

Reminder reminderFor(const QString &profile, const QString &user = QStringLiteral("u1"))
{
    return profile == QLatin1String("twilio") ? smsReminder(user) : reminderOf(reminderFields(user));
}

HttpRequest requestFor(const QString &profile, const PartnerSettings &partner, const Reminder &reminder)
{
    QString problem;
    const auto request = profileNamed(profile).sendRequest(partner, reminder, &problem);
    if (!request)
        qFatal("no request: %s", qPrintable(problem));
    return *request;
}

QByteArray headerOf(const HttpRequest &request, const QByteArray &name)
{
    for (const auto &header : request.headers) {
        if (header.first.compare(name, Qt::CaseInsensitive) == 0)
            return header.second;
    }
    return {};
}

QJsonObject jsonOf(const QByteArray &body)
{
    return QJsonDocument::fromJson(body).object();
}

QByteArray digestOf(const QByteArray &key)
{
    return "once-sha256-" + QCryptographicHash::hash(key, QCryptographicHash::Sha256).toHex();
}

HttpResult response(int status, const QByteArray &body, const HttpHeaders &headers = {})
{
    HttpResult result;
    result.status = HttpResult::Status::Response;
    result.httpStatus = status;
    result.body = body;
    result.headers = headers;
    return result;
}

SecretRedactor redactorFor(const PartnerSettings &partner)
{
    return SecretRedactor(partner.secrets());
}

} // namespace

class TestPartnerProfiles : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void everyProfileIsRegistered();
    void resendRequest();
    void postmarkRequest();
    void sendgridRequest();
    void twilioRequest();
    void slackRequest();
    void slackUrlIsNeitherShownNorEchoed();
    void longKeysBecomeStableDigests();
    void missingFieldsNameTheField_data();
    void missingFieldsNameTheField();
    void settingsNameWhatIsMissing_data();
    void settingsNameWhatIsMissing();
    void expireAfterOfPartnersAndRoutes();
    void classifiesDocumentedAnswers_data();
    void classifiesDocumentedAnswers();
    void echoedSecretsAreRedacted_data();
    void echoedSecretsAreRedacted();
    void lookupRequests();
    void readsLookups_data();
    void readsLookups();
    void simulatorAcceptsEachProfile_data();
    void simulatorAcceptsEachProfile();
    void simulatorRefusesAWrongToken_data();
    void simulatorRefusesAWrongToken();
    void simulatorLookupsFindWhatWasSent_data();
    void simulatorLookupsFindWhatWasSent();
    void simulatorReplaysResendKeysAndRefusesAChangedPayload();
    void simulatorFaultsSpeakEachProvider_data();
    void simulatorFaultsSpeakEachProvider();
    void simulatorRefusesAnUnknownProfile();
    void workerDeliversOnceThroughEachProfile_data();
    void workerDeliversOnceThroughEachProfile();

private:
    QString m_onceBin;
};

void TestPartnerProfiles::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
}

void TestPartnerProfiles::everyProfileIsRegistered()
{
    for (const char *id : {"webhook", "resend", "postmark", "sendgrid", "twilio", "slack"}) {
        const PartnerProfile *profile = partnerProfile(QString::fromLatin1(id));
        QVERIFY2(profile, id);
        QCOMPARE(profile->id(), QLatin1String(id));
    }
    QCOMPARE(profileNamed(QStringLiteral("resend")).honoursKey(), KeyHonouring::Honoured);
    for (const char *id : {"postmark", "sendgrid", "twilio", "slack"})
        QCOMPARE(profileNamed(QString::fromLatin1(id)).honoursKey(), KeyHonouring::Ignored);
}

void TestPartnerProfiles::resendRequest()
{
    const Reminder reminder = reminderOf(reminderFields());
    const HttpRequest request = requestFor(QStringLiteral("resend"), settingsFor(QStringLiteral("resend")), reminder);
    QCOMPARE(request.method, QByteArray("POST"));
    QCOMPARE(request.url.toString(QUrl::FullyEncoded), QStringLiteral("https://api.example.test/emails"));
    QCOMPARE(headerOf(request, "Authorization"), "Bearer " + Token);
    QCOMPARE(headerOf(request, "Content-Type"), QByteArray("application/json"));
    QCOMPARE(headerOf(request, "Idempotency-Key"), reminder.sendKey);
    // A send key holds ':' which tag values may not: the tag carries its digest.
    const QJsonObject expected{
        {QStringLiteral("from"), QStringLiteral("reminders@example.test")},
        {QStringLiteral("to"), QJsonArray{QStringLiteral("ann@example.test")}},
        {QStringLiteral("subject"), QStringLiteral("Dentist")},
        {QStringLiteral("text"), QStringLiteral("Tomorrow at 10:00 & bring the card")},
        {QStringLiteral("tags"), QJsonArray{QJsonObject{{QStringLiteral("name"), QStringLiteral("once_key")},
                                                        {QStringLiteral("value"), QString::fromLatin1(digestOf(reminder.sendKey))}}}},
    };
    QCOMPARE(jsonOf(request.body), expected);
}

void TestPartnerProfiles::postmarkRequest()
{
    const Reminder reminder = reminderOf(reminderFields());
    PartnerSettings partner = settingsFor(QStringLiteral("postmark"), QUrl(QStringLiteral("https://api.example.test/")));
    HttpRequest request = requestFor(QStringLiteral("postmark"), partner, reminder);
    QCOMPARE(request.method, QByteArray("POST"));
    QCOMPARE(request.url.toString(QUrl::FullyEncoded), QStringLiteral("https://api.example.test/email"));
    QCOMPARE(headerOf(request, "X-Postmark-Server-Token"), Token);
    QCOMPARE(headerOf(request, "Authorization"), QByteArray());
    QCOMPARE(headerOf(request, "Accept"), QByteArray("application/json"));
    QCOMPARE(headerOf(request, "Idempotency-Key"), QByteArray());
    QCOMPARE(jsonOf(request.body), (QJsonObject{
                                       {QStringLiteral("From"), QStringLiteral("reminders@example.test")},
                                       {QStringLiteral("To"), QStringLiteral("ann@example.test")},
                                       {QStringLiteral("Subject"), QStringLiteral("Dentist")},
                                       {QStringLiteral("TextBody"), QStringLiteral("Tomorrow at 10:00 & bring the card")},
                                       {QStringLiteral("MessageStream"), QStringLiteral("outbound")},
                                       {QStringLiteral("Metadata"), QJsonObject{{QStringLiteral("once_key"), QString::fromUtf8(reminder.sendKey)}}},
                                   }));
    partner.options.insert(QStringLiteral("message_stream"), QStringLiteral("reminders"));
    request = requestFor(QStringLiteral("postmark"), partner, reminder);
    QCOMPARE(jsonOf(request.body).value(QLatin1String("MessageStream")).toString(), QStringLiteral("reminders"));
}

void TestPartnerProfiles::sendgridRequest()
{
    const Reminder reminder = reminderOf(reminderFields());
    const HttpRequest request = requestFor(QStringLiteral("sendgrid"), settingsFor(QStringLiteral("sendgrid")), reminder);
    QCOMPARE(request.method, QByteArray("POST"));
    QCOMPARE(request.url.toString(QUrl::FullyEncoded), QStringLiteral("https://api.example.test/v3/mail/send"));
    QCOMPARE(headerOf(request, "Authorization"), "Bearer " + Token);
    QCOMPARE(jsonOf(request.body),
             (QJsonObject{
                 {QStringLiteral("personalizations"),
                  QJsonArray{QJsonObject{{QStringLiteral("to"), QJsonArray{QJsonObject{{QStringLiteral("email"), QStringLiteral("ann@example.test")}}}}}}},
                 {QStringLiteral("from"), QJsonObject{{QStringLiteral("email"), QStringLiteral("reminders@example.test")}}},
                 {QStringLiteral("subject"), QStringLiteral("Dentist")},
                 {QStringLiteral("content"), QJsonArray{QJsonObject{{QStringLiteral("type"), QStringLiteral("text/plain")},
                                                                    {QStringLiteral("value"), QStringLiteral("Tomorrow at 10:00 & bring the card")}}}},
                 {QStringLiteral("custom_args"), QJsonObject{{QStringLiteral("once_key"), QString::fromUtf8(reminder.sendKey)}}},
             }));
}

void TestPartnerProfiles::twilioRequest()
{
    const Reminder reminder = smsReminder();
    const HttpRequest request = requestFor(QStringLiteral("twilio"), settingsFor(QStringLiteral("twilio")), reminder);
    QCOMPARE(request.method, QByteArray("POST"));
    QCOMPARE(request.url.toString(QUrl::FullyEncoded),
             QStringLiteral("https://api.example.test/2010-04-01/Accounts/%1/Messages.json").arg(QString::fromLatin1(Account)));
    QCOMPARE(headerOf(request, "Content-Type"), QByteArray("application/x-www-form-urlencoded"));
    QCOMPARE(headerOf(request, "Authorization"), "Basic " + QByteArray(Account + ':' + Token).toBase64());
    QCOMPARE(request.body, QByteArray("To=%2B15557654321&From=%2B15550001111&Body=Tomorrow%20at%2010%3A00%20%26%20bring%20the%20card"));
}

void TestPartnerProfiles::slackRequest()
{
    const HttpRequest request = requestFor(QStringLiteral("slack"), settingsFor(QStringLiteral("slack")), reminderOf(reminderFields()));
    QCOMPARE(request.method, QByteArray("POST"));
    QCOMPARE(request.url.path(), SlackPath);
    QCOMPARE(headerOf(request, "Authorization"), QByteArray());
    QCOMPARE(jsonOf(request.body), (QJsonObject{{QStringLiteral("text"), QStringLiteral("*Dentist*\nTomorrow at 10:00 & bring the card")}}));

    QJsonObject noSubject = reminderFields();
    noSubject.remove(QStringLiteral("subject"));
    const HttpRequest plain = requestFor(QStringLiteral("slack"), settingsFor(QStringLiteral("slack")), reminderOf(noSubject));
    QCOMPARE(jsonOf(plain.body), (QJsonObject{{QStringLiteral("text"), QStringLiteral("Tomorrow at 10:00 & bring the card")}}));
}

void TestPartnerProfiles::slackUrlIsNeitherShownNorEchoed()
{
    const PartnerSettings partner = settingsFor(QStringLiteral("slack"));
    const PartnerProfile &slack = profileNamed(QStringLiteral("slack"));
    QCOMPARE(slack.displayUrl(partner), QStringLiteral("https://api.example.test"));
    HttpPartnerSender sender(slack, partner, 1, 1000);
    QCOMPARE(sender.displayUrl(), QStringLiteral("https://api.example.test"));
    const SendOutcome outcome = slack.classify(
        response(404, "no_service for https://api.example.test" + SlackPath.toUtf8() + " (hookS3CRETpath77)"), Now,
        redactorFor(partner));
    QCOMPARE(outcome.kind, SendOutcome::Kind::CredentialsRefused);
    QVERIFY2(!outcome.error.contains(QLatin1String("S3CRET")), qPrintable(outcome.error));
    QVERIFY2(outcome.error.contains(SecretRedactor::replacement()), qPrintable(outcome.error));

    // `--partner URL --partner-profile slack`: the name logs and the store show is the host.
    QString error;
    const auto single = partnerFromUrl(QStringLiteral("https://hooks.example.test") + SlackPath, QStringLiteral("slack"), {}, &error);
    QVERIFY2(single, qPrintable(error));
    QCOMPARE(single->name, QStringLiteral("https://hooks.example.test"));
    QCOMPARE(single->url.path(), SlackPath);
}

void TestPartnerProfiles::longKeysBecomeStableDigests()
{
    // Ids of spaces are percent-encoded three bytes each: a key of about 400 characters.
    QJsonObject fields = reminderFields(QString(128, QLatin1Char(' ')));
    fields.insert(QStringLiteral("reminder_id"), QString(10, QLatin1Char(' ')));
    const Reminder reminder = reminderOf(fields);
    QVERIFY(reminder.sendKey.size() > 256);
    const QByteArray digest = digestOf(reminder.sendKey);
    QCOMPARE(digest.size(), 76);

    const PartnerSettings resend = settingsFor(QStringLiteral("resend"));
    const QByteArray first = headerOf(requestFor(QStringLiteral("resend"), resend, reminder), "Idempotency-Key");
    QCOMPARE(first, digest);
    QCOMPARE(headerOf(requestFor(QStringLiteral("resend"), resend, reminder), "Idempotency-Key"), first);

    const auto metadataOf = [](const Reminder &r) {
        const HttpRequest request = requestFor(QStringLiteral("postmark"), settingsFor(QStringLiteral("postmark")), r);
        return jsonOf(request.body).value(QLatin1String("Metadata")).toObject().value(QLatin1String("once_key")).toString().toUtf8();
    };
    QCOMPARE(metadataOf(reminder), digest);
    QCOMPARE(metadataOf(reminder), digest);

    // The boundaries: a key of exactly 80 (Postmark) or 256 (Resend) characters goes as itself.
    QCOMPARE(keyWithin(QByteArray(80, 'k'), 80), QByteArray(80, 'k'));
    QCOMPARE(keyWithin(QByteArray(81, 'k'), 80), digestOf(QByteArray(81, 'k')));
    QCOMPARE(keyWithin(QByteArray(256, 'k'), 256), QByteArray(256, 'k'));
    QCOMPARE(keyWithin(QByteArray(257, 'k'), 256), digestOf(QByteArray(257, 'k')));
    // The lookup searches for what the send carried.
    const auto lookup = profileNamed(QStringLiteral("postmark")).lookupRequest(settingsFor(QStringLiteral("postmark")), reminder.sendKey);
    QVERIFY(lookup);
    QCOMPARE(QUrlQuery(lookup->url).queryItemValue(QStringLiteral("metadata_once_key"), QUrl::FullyDecoded).toUtf8(), digest);
}

void TestPartnerProfiles::missingFieldsNameTheField_data()
{
    QTest::addColumn<QString>("profile");
    QTest::addColumn<QString>("field");
    for (const char *profile : {"resend", "postmark", "sendgrid"}) {
        for (const char *field : {"destination", "subject", "body"})
            QTest::addRow("%s without %s", profile, field) << QString::fromLatin1(profile) << QString::fromLatin1(field);
    }
    QTest::newRow("twilio without destination") << QStringLiteral("twilio") << QStringLiteral("destination");
    QTest::newRow("twilio without body") << QStringLiteral("twilio") << QStringLiteral("body");
    QTest::newRow("slack without body") << QStringLiteral("slack") << QStringLiteral("body");
}

void TestPartnerProfiles::missingFieldsNameTheField()
{
    QFETCH(QString, profile);
    QFETCH(QString, field);
    Reminder reminder = reminderFor(profile);
    QJsonObject fields = QJsonDocument::fromJson(reminder.payload).object();
    fields.remove(field);
    reminder.payload = QJsonDocument(fields).toJson(QJsonDocument::Compact);
    if (field == QLatin1String("destination"))
        reminder.destination.clear();
    const QString expected = QStringLiteral("the reminder has no \"%1\", which the %2 profile needs").arg(field, profile);

    QString problem;
    QVERIFY(!profileNamed(profile).sendRequest(settingsFor(profile), reminder, &problem));
    QCOMPARE(problem, expected);

    // Through the sender, the reminder is unsendable, naming the field, and nothing is sent
    // (the URL is a closed port: a request would come back connect-failed).
    HttpPartnerSender sender(profileNamed(profile), settingsFor(profile, QUrl(QStringLiteral("http://127.0.0.1:9"))), 1, 2000);
    std::optional<SendOutcome> outcome;
    QObject context;
    sender.send(reminder, &context, [&outcome](const SendOutcome &o) { outcome = o; });
    QTRY_VERIFY(outcome.has_value());
    QCOMPARE(outcome->kind, SendOutcome::Kind::Unsendable);
    QCOMPARE(outcome->error, expected);

    // The partner's "subject" stands in for a reminder's missing one.
    if (field == QLatin1String("subject")) {
        PartnerSettings partner = settingsFor(profile);
        partner.subject = QStringLiteral("A reminder");
        QVERIFY(profileNamed(profile).sendRequest(partner, reminder, &problem));
    }
}

void TestPartnerProfiles::settingsNameWhatIsMissing_data()
{
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("error");
    QTest::newRow("resend without from")
        << QByteArray(R"({"partners":{"mail":{"profile":"resend","url":"https://api.resend.com","token":"env:ONCE_TEST_PROFILE_TOKEN"}}})")
        << QStringLiteral("partner \"mail\": the resend profile needs \"from\": the sender's address");
    QTest::newRow("postmark without token")
        << QByteArray(R"({"partners":{"mail":{"profile":"postmark","url":"https://api.postmarkapp.com","from":"a@b.test"}}})")
        << QStringLiteral("partner \"mail\": the postmark profile needs \"token\": the server token");
    QTest::newRow("twilio without account")
        << QByteArray(R"({"partners":{"sms":{"profile":"twilio","url":"https://api.twilio.com","token":"env:ONCE_TEST_PROFILE_TOKEN","from":"+15550001111"}}})")
        << QStringLiteral("partner \"sms\": the twilio profile needs \"account\": the Account SID");
    QTest::newRow("sendgrid activity_api not a boolean")
        << QByteArray(R"({"partners":{"mail":{"profile":"sendgrid","url":"https://api.sendgrid.com","token":"env:ONCE_TEST_PROFILE_TOKEN","from":"a@b.test","activity_api":"yes"}}})")
        << QStringLiteral("partner \"mail\": the sendgrid profile \"activity_api\" must be true or false");
    QTest::newRow("slack with only a host")
        << QByteArray(R"({"partners":{"chat":{"profile":"slack","url":"https://hooks.slack.com"}}})")
        << QStringLiteral("partner \"chat\": the slack profile \"url\" must be the incoming webhook's whole URL (https://hooks.slack.com/services/...)");
    QTest::newRow("postmark option on resend")
        << QByteArray(R"({"partners":{"mail":{"profile":"resend","url":"https://api.resend.com","token":"env:ONCE_TEST_PROFILE_TOKEN","from":"a@b.test","message_stream":"x"}}})")
        << QStringLiteral("partner \"mail\": \"message_stream\" is not a setting of the resend profile");
    const QString expireAfter = QStringLiteral("\"expire_after\" must be a duration such as \"90s\", \"5m\", \"2h\" or \"7d\" (1s to 30d)");
    QTest::newRow("expire_after in words")
        << QByteArray(R"({"partners":{"hook":{"url":"https://hooks.example.com","expire_after":"2 hours"}}})")
        << QStringLiteral("partner \"hook\": ") + expireAfter;
    QTest::newRow("expire_after a number")
        << QByteArray(R"({"partners":{"hook":{"url":"https://hooks.example.com","expire_after":7200}}})")
        << QStringLiteral("partner \"hook\": ") + expireAfter;
    QTest::newRow("expire_after zero")
        << QByteArray(R"({"partners":{"hook":{"url":"https://hooks.example.com","expire_after":"0s"}}})")
        << QStringLiteral("partner \"hook\": ") + expireAfter;
    QTest::newRow("expire_after over 30 days")
        << QByteArray(R"({"partners":{"hook":{"url":"https://hooks.example.com","expire_after":"31d"}}})")
        << QStringLiteral("partner \"hook\": ") + expireAfter;
    QTest::newRow("route expire_after")
        << QByteArray(R"({"partners":{"hook":{"url":"https://hooks.example.com"}},"routes":{"sms":{"partner":"hook","expire_after":"soon"}}})")
        << QStringLiteral("route \"sms\": ") + expireAfter;
    QTest::newRow("route object without a partner")
        << QByteArray(R"({"partners":{"hook":{"url":"https://hooks.example.com"}},"routes":{"sms":{"expire_after":"5m"}}})")
        << QStringLiteral("route \"sms\" names no partner of this file");
    QTest::newRow("route object with another setting")
        << QByteArray(R"({"partners":{"hook":{"url":"https://hooks.example.com"}},"routes":{"sms":{"partner":"hook","rate":"5/s"}}})")
        << QStringLiteral("route \"sms\": \"rate\" is not a setting of a route (\"partner\", \"expire_after\")");
}

// A partner's expire_after and a route's own: a route's wins for its channel, a channel
// routed by name takes its partner's, "*" may carry its own.
void TestPartnerProfiles::expireAfterOfPartnersAndRoutes()
{
    QString error;
    const auto config = parsePartners(QByteArray(R"({"partners": {
        "mail": {"url": "https://mail.example.com", "expire_after": "1d"},
        "texts": {"url": "https://texts.example.com"}
    }, "routes": {"email": "mail", "sms": {"partner": "texts", "expire_after": "30m"},
                  "push": "texts", "*": {"partner": "mail", "expire_after": "90s"}}})"),
                                      &error);
    QVERIFY2(config, qPrintable(error));
    QCOMPARE(config->find(QStringLiteral("mail"))->expireAfterMs, 24 * 3600 * 1000LL);
    QCOMPARE(config->find(QStringLiteral("texts"))->expireAfterMs, qint64(0));
    QCOMPARE(config->routes.partnerFor(QStringLiteral("sms")), QStringLiteral("texts"));
    QCOMPARE(config->expireAfterFor(QStringLiteral("email")), 24 * 3600 * 1000LL);
    QCOMPARE(config->expireAfterFor(QStringLiteral("sms")), 30 * 60 * 1000LL);
    QCOMPARE(config->expireAfterFor(QStringLiteral("push")), qint64(0));
    QCOMPARE(config->expireAfterFor(QStringLiteral("fax")), 90 * 1000LL);
}

void TestPartnerProfiles::settingsNameWhatIsMissing()
{
    QFETCH(QByteArray, json);
    QFETCH(QString, error);
    qputenv("ONCE_TEST_PROFILE_TOKEN", Token);
    QString actual;
    QVERIFY(!parsePartners(json, &actual));
    QCOMPARE(actual, error);
    QVERIFY(!actual.contains(QString::fromLatin1(Token)));
}

void TestPartnerProfiles::classifiesDocumentedAnswers_data()
{
    QTest::addColumn<QString>("profile");
    QTest::addColumn<int>("status");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<HttpHeaders>("headers");
    QTest::addColumn<SendOutcome::Kind>("kind");
    QTest::addColumn<QString>("errorClass");
    QTest::addColumn<QString>("providerRequestId");
    QTest::addColumn<qint64>("retryAfterMs");
    using K = SendOutcome::Kind;
    const HttpHeaders none;
    QTest::newRow("resend sent") << "resend" << 200 << QByteArray(R"({"id":"4ef9a417-02e9-4d39-ad75-9611e0fcc33c"})") << none << K::Applied << QString() << "4ef9a417-02e9-4d39-ad75-9611e0fcc33c" << qint64(-1);
    QTest::newRow("resend concurrent key") << "resend" << 409 << QByteArray(R"({"statusCode":409,"name":"concurrent_idempotent_requests","message":"Same idempotency key used while original request is still in progress."})") << none << K::Transient << "key-in-flight" << QString() << qint64(-1);
    QTest::newRow("resend payload changed") << "resend" << 409 << QByteArray(R"({"statusCode":409,"name":"invalid_idempotent_request","message":"Same idempotency key used with a different request payload."})") << none << K::PayloadChanged << "payload-changed" << QString() << qint64(-1);
    QTest::newRow("resend missing field") << "resend" << 422 << QByteArray(R"({"statusCode":422,"name":"missing_required_field","message":"Missing `to` field."})") << none << K::Permanent << "rejected" << QString() << qint64(-1);
    QTest::newRow("resend test-domain recipient") << "resend" << 403 << QByteArray(R"({"statusCode":403,"name":"validation_error","message":"You can only send testing emails to your own email address."})") << none << K::Permanent << "rejected" << QString() << qint64(-1);
    QTest::newRow("resend invalid key") << "resend" << 403 << QByteArray(R"({"statusCode":403,"name":"invalid_api_key","message":"API key is invalid."})") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("resend missing key") << "resend" << 401 << QByteArray(R"({"statusCode":401,"name":"missing_api_key","message":"Missing API key in the authorization header."})") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("resend rate limit") << "resend" << 429 << QByteArray(R"({"statusCode":429,"name":"rate_limit_exceeded","message":"Too many requests."})") << HttpHeaders{{"retry-after", "2"}} << K::Transient << "rate-limited" << QString() << qint64(2000);

    QTest::newRow("postmark sent") << "postmark" << 200 << QByteArray(R"({"To":"ann@example.test","SubmittedAt":"2026-12-06T10:00:00Z","MessageID":"b7bc2f4a-e38e-4336-af7d-e6c392c2f817","ErrorCode":0,"Message":"OK"})") << none << K::Applied << QString() << "b7bc2f4a-e38e-4336-af7d-e6c392c2f817" << qint64(-1);
    QTest::newRow("postmark bad token") << "postmark" << 401 << QByteArray(R"({"ErrorCode":10,"Message":"The Server Token you provided in the X-Postmark-Server-Token request header was invalid."})") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("postmark invalid email") << "postmark" << 422 << QByteArray(R"({"ErrorCode":300,"Message":"Invalid 'To' address."})") << none << K::Permanent << "rejected" << QString() << qint64(-1);
    QTest::newRow("postmark inactive recipient") << "postmark" << 422 << QByteArray(R"({"ErrorCode":406,"Message":"You tried to send to a recipient that has been marked as inactive."})") << none << K::Permanent << "rejected" << QString() << qint64(-1);
    QTest::newRow("postmark unconfirmed sender") << "postmark" << 422 << QByteArray(R"({"ErrorCode":401,"Message":"Sender signature not confirmed."})") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("postmark rate limit") << "postmark" << 429 << QByteArray(R"({"ErrorCode":0,"Message":"Rate limit exceeded"})") << none << K::Transient << "rate-limited" << QString() << qint64(-1);
    QTest::newRow("postmark 500") << "postmark" << 500 << QByteArray(R"({"ErrorCode":0,"Message":"Internal"})") << none << K::Transient << "http-5xx" << QString() << qint64(-1);

    QTest::newRow("sendgrid accepted") << "sendgrid" << 202 << QByteArray() << HttpHeaders{{"X-Message-Id", "W0QbV0yQRp2IuClGOP1cMg"}} << K::Applied << QString() << "W0QbV0yQRp2IuClGOP1cMg" << qint64(-1);
    QTest::newRow("sendgrid rate limit resets") << "sendgrid" << 429 << QByteArray(R"({"errors":[{"message":"too many requests","field":null,"help":null}]})") << HttpHeaders{{"X-RateLimit-Reset", QByteArray::number(Now / 1000 + 30)}} << K::Transient << "rate-limited" << QString() << qint64(30000);
    QTest::newRow("sendgrid bad key") << "sendgrid" << 401 << QByteArray(R"({"errors":[{"message":"The provided authorization grant is invalid, expired, or revoked","field":null,"help":null}]})") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("sendgrid bad address") << "sendgrid" << 400 << QByteArray(R"({"errors":[{"message":"Does not contain a valid address.","field":"personalizations.0.to.0.email","help":null}]})") << none << K::Permanent << "rejected" << QString() << qint64(-1);

    QTest::newRow("mailgun queued") << "mailgun" << 200 << QByteArray(R"({"id":"<20261206100000.1@mg.example.test>","message":"Queued. Thank you."})") << none << K::Applied << QString() << "20261206100000.1@mg.example.test" << qint64(-1);
    QTest::newRow("mailgun forbidden") << "mailgun" << 401 << QByteArray("Forbidden") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("mailgun bad request") << "mailgun" << 400 << QByteArray(R"({"message":"to parameter is not a valid address. please check documentation"})") << none << K::Permanent << "rejected" << QString() << qint64(-1);
    QTest::newRow("mailgun 500") << "mailgun" << 500 << QByteArray(R"({"message":"Internal"})") << none << K::Transient << "http-5xx" << QString() << qint64(-1);

    QTest::newRow("twilio created") << "twilio" << 201 << QByteArray(R"({"sid":"SM1f0e8ae6ade43cb3c0ce4525424e404f","status":"queued"})") << none << K::Applied << QString() << "SM1f0e8ae6ade43cb3c0ce4525424e404f" << qint64(-1);
    QTest::newRow("twilio invalid To") << "twilio" << 400 << QByteArray(R"({"code":21211,"message":"The 'To' number +1555 is not a valid phone number.","more_info":"https://www.twilio.com/docs/errors/21211","status":400})") << none << K::Permanent << "rejected" << QString() << qint64(-1);
    QTest::newRow("twilio too many requests") << "twilio" << 429 << QByteArray(R"({"code":20429,"message":"Too Many Requests","status":429})") << none << K::Transient << "rate-limited" << QString() << qint64(-1);
    QTest::newRow("twilio authentication") << "twilio" << 401 << QByteArray(R"({"code":20003,"message":"Authenticate","status":401})") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("twilio no such account") << "twilio" << 404 << QByteArray(R"({"code":20404,"message":"The requested resource was not found","status":404})") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);

    QTest::newRow("slack ok") << "slack" << 200 << QByteArray("ok") << none << K::Applied << QString() << QString() << qint64(-1);
    QTest::newRow("slack invalid payload") << "slack" << 400 << QByteArray("invalid_payload") << none << K::Permanent << "rejected" << QString() << qint64(-1);
    QTest::newRow("slack no service") << "slack" << 404 << QByteArray("no_service") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("slack invalid token") << "slack" << 403 << QByteArray("invalid_token") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("slack archived channel") << "slack" << 410 << QByteArray("channel_is_archived") << none << K::CredentialsRefused << "credentials-refused" << QString() << qint64(-1);
    QTest::newRow("slack rate limited") << "slack" << 429 << QByteArray("rate_limited") << HttpHeaders{{"Retry-After", "30"}} << K::Transient << "rate-limited" << QString() << qint64(30000);
}

void TestPartnerProfiles::classifiesDocumentedAnswers()
{
    QFETCH(QString, profile);
    QFETCH(int, status);
    QFETCH(QByteArray, body);
    QFETCH(HttpHeaders, headers);
    QFETCH(SendOutcome::Kind, kind);
    QFETCH(QString, errorClass);
    QFETCH(QString, providerRequestId);
    QFETCH(qint64, retryAfterMs);
    const SendOutcome outcome = profileNamed(profile).classify(response(status, body, headers), Now, {});
    QCOMPARE(outcome.kind, kind);
    QCOMPARE(outcome.errorClass, errorClass);
    QCOMPARE(outcome.httpStatus, status);
    if (!providerRequestId.isEmpty())
        QCOMPARE(outcome.providerRequestId, providerRequestId);
    QCOMPARE(outcome.retryAfterMs, retryAfterMs);
}

void TestPartnerProfiles::echoedSecretsAreRedacted_data()
{
    QTest::addColumn<QString>("profile");
    QTest::addColumn<int>("status");
    for (const char *profile : {"webhook", "resend", "postmark", "sendgrid", "twilio"}) {
        for (int status : {400, 401, 422, 500})
            QTest::addRow("%s %d", profile, status) << QString::fromLatin1(profile) << status;
    }
}

void TestPartnerProfiles::echoedSecretsAreRedacted()
{
    QFETCH(QString, profile);
    QFETCH(int, status);
    const PartnerSettings partner = settingsFor(profile);
    const QByteArray body = R"({"Message":"header was X-Postmark-Server-Token: )" + Token + R"(","message":"Authorization: Bearer )"
                            + Token + R"(","name":"x","ErrorCode":300})";
    const SendOutcome outcome = profileNamed(profile).classify(response(status, body), Now, redactorFor(partner));
    QVERIFY2(!outcome.error.contains(QLatin1String("S3CRET")), qPrintable(outcome.error));
    QVERIFY2(outcome.error.contains(SecretRedactor::replacement()), qPrintable(outcome.error));
}

void TestPartnerProfiles::lookupRequests()
{
    const QByteArray key = "u%201:r+1:2026-12-07T09:00:00Z";
    PartnerSettings postmark = settingsFor(QStringLiteral("postmark"));
    const auto byMetadata = profileNamed(QStringLiteral("postmark")).lookupRequest(postmark, key);
    QVERIFY(byMetadata);
    QCOMPARE(byMetadata->method, QByteArray("GET"));
    QCOMPARE(byMetadata->url.toString(QUrl::FullyEncoded),
             QStringLiteral("https://api.example.test/messages/outbound?count=1&offset=0&metadata_once_key=u%25201%3Ar%2B1%3A2026-12-07T09%3A00%3A00Z"));
    QCOMPARE(headerOf(*byMetadata, "X-Postmark-Server-Token"), Token);
    QVERIFY(profileNamed(QStringLiteral("postmark")).canLookUp(postmark));

    PartnerSettings sendgrid = settingsFor(QStringLiteral("sendgrid"));
    QVERIFY(!profileNamed(QStringLiteral("sendgrid")).canLookUp(sendgrid));
    QVERIFY(!profileNamed(QStringLiteral("sendgrid")).lookupRequest(sendgrid, key));
    sendgrid.options.insert(QStringLiteral("activity_api"), true);
    QVERIFY(profileNamed(QStringLiteral("sendgrid")).canLookUp(sendgrid));
    const auto activity = profileNamed(QStringLiteral("sendgrid")).lookupRequest(sendgrid, key);
    QVERIFY(activity);
    QCOMPARE(activity->url.path(), QStringLiteral("/v3/messages"));
    QCOMPARE(headerOf(*activity, "Authorization"), "Bearer " + Token);
    const QUrlQuery query(activity->url);
    QCOMPARE(query.queryItemValue(QStringLiteral("limit")), QStringLiteral("1"));
    QCOMPARE(query.queryItemValue(QStringLiteral("query"), QUrl::FullyDecoded),
             QStringLiteral("unique_args['once_key']=\"u%201:r+1:2026-12-07T09:00:00Z\""));

    for (const char *id : {"resend", "twilio", "slack"})
        QVERIFY2(!profileNamed(QString::fromLatin1(id)).canLookUp(settingsFor(QString::fromLatin1(id))), id);
}

void TestPartnerProfiles::readsLookups_data()
{
    QTest::addColumn<QString>("profile");
    QTest::addColumn<int>("status");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<LookupResult::Kind>("kind");
    QTest::addColumn<QString>("messageId");
    using K = LookupResult::Kind;
    QTest::newRow("postmark found") << "postmark" << 200 << QByteArray(R"({"TotalCount":1,"Messages":[{"MessageID":"0a129aee-e1cd-480d-b08d-4f48548ff48d"}]})") << K::Found << "0a129aee-e1cd-480d-b08d-4f48548ff48d";
    QTest::newRow("postmark not found") << "postmark" << 200 << QByteArray(R"({"TotalCount":0,"Messages":[]})") << K::NotFound << QString();
    QTest::newRow("postmark without a count") << "postmark" << 200 << QByteArray(R"({"Messages":[]})") << K::Failed << QString();
    QTest::newRow("postmark refused") << "postmark" << 401 << QByteArray(R"({"ErrorCode":10,"Message":"bad token"})") << K::Failed << QString();
    QTest::newRow("sendgrid found") << "sendgrid" << 200 << QByteArray(R"({"messages":[{"msg_id":"filter0001.1.2.3","status":"delivered"}]})") << K::Found << "filter0001.1.2.3";
    QTest::newRow("sendgrid not found") << "sendgrid" << 200 << QByteArray(R"({"messages":[]})") << K::NotFound << QString();
    QTest::newRow("sendgrid rate limited") << "sendgrid" << 429 << QByteArray(R"({"errors":[{"message":"too many requests"}]})") << K::Failed << QString();
}

void TestPartnerProfiles::readsLookups()
{
    QFETCH(QString, profile);
    QFETCH(int, status);
    QFETCH(QByteArray, body);
    QFETCH(LookupResult::Kind, kind);
    QFETCH(QString, messageId);
    const LookupResult lookup = profileNamed(profile).readLookup(response(status, body), "k", {});
    QCOMPARE(lookup.kind, kind);
    QCOMPARE(lookup.providerMessageId, messageId);
    QCOMPARE(lookup.error.isEmpty(), kind != LookupResult::Kind::Failed);
}

namespace {

// A `once partner-sim --profile NAME` process expecting Token (Slack: the URL's secret),
// and the partner settings that reach it.
struct SimulatedPartner
{
    quint16 port = 0;
    PartnerSettings partner;
};

SimulatedPartner startSimulator(OnceRunner &runner, const QString &profile, const QStringList &extra = {})
{
    SimulatedPartner simulated;
    const QByteArray expected = profile == QLatin1String("slack") ? QByteArray("hookS3CRETpath77") : Token;
    simulated.port = runner.startPartnerSim(QStringList{QStringLiteral("--profile"), profile, QStringLiteral("--token"),
                                                        QString::fromLatin1(expected)}
                                            + extra);
    simulated.partner = settingsFor(profile, QUrl(QStringLiteral("http://127.0.0.1:%1").arg(simulated.port)));
    return simulated;
}

SendOutcome sendThrough(const PartnerSettings &partner, const Reminder &reminder)
{
    HttpPartnerSender sender(profileNamed(partner.profile), partner, 1, 5000);
    std::optional<SendOutcome> outcome;
    QObject context;
    sender.send(reminder, &context, [&outcome](const SendOutcome &o) { outcome = o; });
    if (!pumpUntil([&outcome] { return outcome.has_value(); }, 10000)) {
        SendOutcome none;
        none.error = QStringLiteral("no outcome");
        return none;
    }
    return *outcome;
}

LookupResult lookUpThrough(const PartnerSettings &partner, const QByteArray &key)
{
    HttpPartnerSender sender(profileNamed(partner.profile), partner, 1, 5000);
    std::optional<LookupResult> result;
    QObject context;
    sender.lookUp(key, &context, [&result](const LookupResult &r) { result = r; });
    if (!pumpUntil([&result] { return result.has_value(); }, 10000))
        return {};
    return *result;
}

QJsonObject simulatorJson(quint16 port, const QByteArray &path)
{
    QString error;
    const QByteArray body = httpGet(port, path, &error);
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    return QJsonDocument::fromJson(body).object();
}

} // namespace

void TestPartnerProfiles::simulatorAcceptsEachProfile_data()
{
    QTest::addColumn<QString>("profile");
    QTest::addColumn<bool>("replays");
    QTest::addColumn<QString>("providerRequestIdPrefix");
    QTest::newRow("webhook") << "webhook" << true << "req_";
    QTest::newRow("resend") << "resend" << true << "00000000-";
    QTest::newRow("postmark") << "postmark" << false << "00000000-";
    QTest::newRow("sendgrid") << "sendgrid" << false << "sg";
    QTest::newRow("mailgun") << "mailgun" << false << "sim.";
    QTest::newRow("twilio") << "twilio" << false << "SM";
    QTest::newRow("slack") << "slack" << false << "";
}

void TestPartnerProfiles::simulatorAcceptsEachProfile()
{
    QFETCH(QString, profile);
    QFETCH(bool, replays);
    QFETCH(QString, providerRequestIdPrefix);
    OnceRunner runner(m_onceBin, QString());
    SimulatedPartner simulated = startSimulator(runner, profile);
    QVERIFY(simulated.port != 0);

    const Reminder reminder = reminderFor(profile);
    const SendOutcome first = sendThrough(simulated.partner, reminder);
    QVERIFY2(first.kind == SendOutcome::Kind::Applied, qPrintable(first.error));
    if (!providerRequestIdPrefix.isEmpty())
        QVERIFY2(first.providerRequestId.startsWith(providerRequestIdPrefix), qPrintable(first.providerRequestId));
    QJsonObject stats = simulatorJson(simulated.port, "/stats");
    QCOMPARE(stats.value(QLatin1String("requests")).toInt(), 1);
    QCOMPARE(stats.value(QLatin1String("effects")).toInt(), 1);

    // The same reminder again, as after an answer lost in doubt: a provider with
    // idempotency replays, every other one acts again, and /effects shows the duplicate.
    const SendOutcome second = sendThrough(simulated.partner, reminder);
    QVERIFY2(second.kind == SendOutcome::Kind::Applied, qPrintable(second.error));
    stats = simulatorJson(simulated.port, "/stats");
    QCOMPARE(stats.value(QLatin1String("effects")).toInt(), replays ? 1 : 2);
    QCOMPARE(stats.value(QLatin1String("duplicate_effects")).toInt(), replays ? 0 : 1);
    const QJsonObject effects = simulatorJson(simulated.port, "/effects");
    QCOMPARE(effects.size(), 1);
    QCOMPARE(effects.begin().value().toInt(), replays ? 1 : 2);
}

void TestPartnerProfiles::simulatorRefusesAWrongToken_data()
{
    QTest::addColumn<QString>("profile");
    for (const char *profile : {"webhook", "resend", "postmark", "sendgrid", "mailgun", "twilio", "slack"})
        QTest::newRow(profile) << QString::fromLatin1(profile);
}

void TestPartnerProfiles::simulatorRefusesAWrongToken()
{
    QFETCH(QString, profile);
    OnceRunner runner(m_onceBin, QString());
    SimulatedPartner simulated = startSimulator(runner, profile);
    QVERIFY(simulated.port != 0);
    if (profile == QLatin1String("slack"))
        simulated.partner.url.setPath(QStringLiteral("/services/T0SIM/B0SIM/hookS3CRETwrong77"));
    else
        simulated.partner.token = "tok-S3CRET-wrong";
    const SendOutcome outcome = sendThrough(simulated.partner, reminderFor(profile));
    QVERIFY2(outcome.kind == SendOutcome::Kind::CredentialsRefused, qPrintable(outcome.error));
    QVERIFY2(!outcome.error.contains(QLatin1String("S3CRET")), qPrintable(outcome.error));
    QCOMPARE(simulatorJson(simulated.port, "/stats").value(QLatin1String("effects")).toInt(), 0);
}

void TestPartnerProfiles::simulatorLookupsFindWhatWasSent_data()
{
    QTest::addColumn<QString>("profile");
    QTest::newRow("postmark") << "postmark";
    QTest::newRow("sendgrid") << "sendgrid";
    QTest::newRow("webhook") << "webhook";
}

void TestPartnerProfiles::simulatorLookupsFindWhatWasSent()
{
    QFETCH(QString, profile);
    OnceRunner runner(m_onceBin, QString());
    SimulatedPartner simulated = startSimulator(runner, profile);
    QVERIFY(simulated.port != 0);
    if (profile == QLatin1String("sendgrid"))
        simulated.partner.options.insert(QStringLiteral("activity_api"), true);
    if (profile == QLatin1String("webhook"))
        simulated.partner.lookup = QStringLiteral("http://127.0.0.1:%1/reminders/{key}").arg(simulated.port);

    // A key long enough to travel as its digest, and one never sent.
    QJsonObject fields = reminderFields(QString(100, QLatin1Char(' ')));
    const Reminder sent = reminderOf(fields);
    const Reminder unsent = reminderOf(reminderFields(QStringLiteral("nobody")));
    const SendOutcome outcome = sendThrough(simulated.partner, sent);
    QVERIFY2(outcome.kind == SendOutcome::Kind::Applied, qPrintable(outcome.error));

    const LookupResult found = lookUpThrough(simulated.partner, sent.sendKey);
    QVERIFY2(found.kind == LookupResult::Kind::Found, qPrintable(found.error));
    QVERIFY(!found.providerMessageId.isEmpty());
    const LookupResult notFound = lookUpThrough(simulated.partner, unsent.sendKey);
    QVERIFY2(notFound.kind == LookupResult::Kind::NotFound, qPrintable(notFound.error));
}

void TestPartnerProfiles::simulatorReplaysResendKeysAndRefusesAChangedPayload()
{
    OnceRunner runner(m_onceBin, QString());
    SimulatedPartner simulated = startSimulator(runner, QStringLiteral("resend"));
    QVERIFY(simulated.port != 0);
    Reminder reminder = reminderOf(reminderFields());
    QCOMPARE(sendThrough(simulated.partner, reminder).kind, SendOutcome::Kind::Applied);
    // The same key with another body: Resend's 409 invalid_idempotent_request.
    QJsonObject changed = reminderFields();
    changed.insert(QStringLiteral("body"), QStringLiteral("Changed"));
    reminder.payload = QJsonDocument(changed).toJson(QJsonDocument::Compact);
    const SendOutcome outcome = sendThrough(simulated.partner, reminder);
    QCOMPARE(outcome.kind, SendOutcome::Kind::PayloadChanged);
    QCOMPARE(outcome.httpStatus, 409);
    QCOMPARE(simulatorJson(simulated.port, "/stats").value(QLatin1String("effects")).toInt(), 1);
}

void TestPartnerProfiles::simulatorFaultsSpeakEachProvider_data()
{
    QTest::addColumn<QString>("profile");
    for (const char *profile : {"webhook", "resend", "postmark", "sendgrid", "twilio", "slack"})
        QTest::newRow(profile) << QString::fromLatin1(profile);
}

void TestPartnerProfiles::simulatorFaultsSpeakEachProvider()
{
    QFETCH(QString, profile);
    OnceRunner runner(m_onceBin, QString());
    const Reminder reminder = reminderFor(profile);

    // A 429 in the provider's words, with its way of saying when to come back.
    SimulatedPartner throttled = startSimulator(runner, profile, {QStringLiteral("--throttle-rate"), QStringLiteral("1"),
                                                                  QStringLiteral("--retry-after"), QStringLiteral("7")});
    QVERIFY(throttled.port != 0);
    SendOutcome outcome = sendThrough(throttled.partner, reminder);
    QCOMPARE(outcome.kind, SendOutcome::Kind::Transient);
    QCOMPARE(outcome.errorClass, QStringLiteral("rate-limited"));
    // SendGrid's reset is an epoch second: a delay of 6 to 7 seconds, by the clock.
    QVERIFY2(outcome.retryAfterMs > 5000 && outcome.retryAfterMs <= 7000, qPrintable(QString::number(outcome.retryAfterMs)));

    SimulatedPartner failing = startSimulator(runner, profile, {QStringLiteral("--fail-rate"), QStringLiteral("1")});
    QVERIFY(failing.port != 0);
    outcome = sendThrough(failing.partner, reminder);
    QCOMPARE(outcome.kind, SendOutcome::Kind::Transient);
    QCOMPARE(outcome.errorClass, QStringLiteral("http-5xx"));
    QCOMPARE(simulatorJson(failing.port, "/stats").value(QLatin1String("effects")).toInt(), 0);

    // Applied, then the answer lost: in doubt, and the effect is there.
    SimulatedPartner dropping = startSimulator(runner, profile, {QStringLiteral("--drop-after-accept-rate"), QStringLiteral("1")});
    QVERIFY(dropping.port != 0);
    outcome = sendThrough(dropping.partner, reminder);
    QCOMPARE(outcome.kind, SendOutcome::Kind::InDoubt);
    const QJsonObject stats = simulatorJson(dropping.port, "/stats");
    QCOMPARE(stats.value(QLatin1String("effects")).toInt(), 1);
    QCOMPARE(stats.value(QLatin1String("dropped")).toInt(), 1);
}

void TestPartnerProfiles::workerDeliversOnceThroughEachProfile_data()
{
    QTest::addColumn<QString>("profile");
    QTest::addColumn<bool>("partnersFile");
    for (const char *profile : {"webhook", "resend", "postmark", "sendgrid", "twilio", "slack"}) {
        QTest::addRow("%s --partner", profile) << QString::fromLatin1(profile) << false;
        QTest::addRow("%s --partners", profile) << QString::fromLatin1(profile) << true;
    }
}

// The whole way: reminders enqueued into a SQLite store, `once worker --partner URL
// --partner-profile NAME` (or `--partners FILE`) `--until-idle` sending them through the
// profile to its simulator, one effect each.
void TestPartnerProfiles::workerDeliversOnceThroughEachProfile()
{
    QFETCH(QString, profile);
    QFETCH(bool, partnersFile);
    constexpr int Count = 5;
    TestStores stores;
    OnceRunner runner(m_onceBin, stores.newUrl());
    const SimulatedPartner simulated = startSimulator(runner, profile);
    QVERIFY(simulated.port != 0);

    QTemporaryDir dir;
    QByteArray lines;
    QList<QByteArray> keys;
    for (int i = 0; i < Count; ++i) {
        QJsonObject fields = reminderFields(QStringLiteral("e2e-user-%1").arg(i));
        fields.insert(QStringLiteral("destination"), profile == QLatin1String("twilio")
                                                         ? QStringLiteral("+1555765%1").arg(i, 4, 10, QLatin1Char('0'))
                                                         : QStringLiteral("user%1@example.test").arg(i));
        // Slack's messages have no recipient: the text is all that tells two apart.
        fields.insert(QStringLiteral("body"), QStringLiteral("Reminder %1: tomorrow at 10:00").arg(i));
        const Reminder reminder = reminderOf(fields);
        keys.append(reminder.sendKey);
        lines += QJsonDocument(fields).toJson(QJsonDocument::Compact) + '\n';
    }
    QFile input(dir.filePath(QStringLiteral("reminders.jsonl")));
    QVERIFY(input.open(QIODevice::WriteOnly) && input.write(lines) == lines.size());
    input.close();
    const ProcessResult enqueue = runner.run({QStringLiteral("enqueue"), input.fileName()});
    QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());

    const PartnerSettings &partner = simulated.partner;
    QJsonObject settings{{QStringLiteral("profile"), profile}, {QStringLiteral("url"), partner.url.toString()}};
    if (!partner.token.isEmpty())
        settings.insert(QStringLiteral("token"), QStringLiteral("env:ONCE_TEST_PARTNER_TOKEN"));
    if (profile != QLatin1String("webhook") && profile != QLatin1String("slack"))
        settings.insert(QStringLiteral("from"), partner.from);
    if (!partner.account.isEmpty())
        settings.insert(QStringLiteral("account"), QString::fromLatin1(partner.account));
    const QByteArray partners = QJsonDocument(QJsonObject{{QStringLiteral("partners"), QJsonObject{{QStringLiteral("p"), settings}}}})
                                    .toJson();
    QFile file(dir.filePath(QStringLiteral("partners.json")));
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write(partners) == partners.size());
    file.close();

    // The shorthand carries a provider's "from" in the URL's query and Twilio's account as
    // its user; the token comes from ONCE_PARTNER_TOKEN.
    QUrl shorthand = partner.url;
    if (profile != QLatin1String("webhook") && profile != QLatin1String("slack"))
        shorthand.setQuery(QStringLiteral("from=") + QString::fromLatin1(QUrl::toPercentEncoding(partner.from)));
    shorthand.setUserName(QString::fromLatin1(partner.account));
    const QStringList where = partnersFile ? QStringList{QStringLiteral("--partners"), file.fileName()}
                                           : QStringList{QStringLiteral("--partner"), shorthand.toString(),
                                                         QStringLiteral("--partner-profile"), profile};
    const ProcessResult worker = runner.run(QStringList{QStringLiteral("worker")} + where + QStringList{QStringLiteral("--until-idle")},
                                            {{QStringLiteral("ONCE_TEST_PARTNER_TOKEN"), QString::fromLatin1(Token)},
                                             {QStringLiteral("ONCE_PARTNER_TOKEN"), QString::fromLatin1(partner.token)}},
                                            WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    // The token (Slack: the URL's path) reached the request only: nothing the worker said,
    // and nothing the store holds (the partner's name on every send, the heartbeat), has it.
    QVERIFY(!worker.out.contains("S3CRET") && !worker.err.contains("S3CRET"));
    QStringList scanned;
    const QStringList holding = whereStoreHolds(stores, runner.storeUrl(), "S3CRET", QDateTime(), &scanned);
    QVERIFY2(holding.isEmpty(), qPrintable(holding.join(QLatin1String(", "))));

    const QJsonObject effects = simulatorJson(simulated.port, "/effects");
    const QJsonObject stats = simulatorJson(simulated.port, "/stats");
    QCOMPARE(stats.value(QLatin1String("effects")).toInt(), Count);
    QCOMPARE(stats.value(QLatin1String("duplicate_effects")).toInt(), 0);
    QCOMPARE(effects.size(), Count);
    for (auto it = effects.begin(); it != effects.end(); ++it)
        QCOMPARE(it.value().toInt(), 1);
    const QString problems = statsProblems(runner.stats(), {{QStringLiteral("acked"), Count},
                                                           {QStringLiteral("ready"), 0},
                                                           {QStringLiteral("in_flight"), 0}});
    QVERIFY2(problems.isEmpty(), qPrintable(problems));
}

void TestPartnerProfiles::simulatorRefusesAnUnknownProfile()
{
    OnceRunner runner(m_onceBin, QString());
    const ProcessResult result = runner.run({QStringLiteral("partner-sim"), QStringLiteral("--port"), QStringLiteral("0"),
                                             QStringLiteral("--profile"), QStringLiteral("mailchimp")});
    QVERIFY2(result.exitedWith(2), result.describe().constData());
    QVERIFY2(result.err.contains("--profile must be one of: webhook, resend, postmark, sendgrid, mailgun, twilio, slack"),
             result.err.constData());
}

QTEST_GUILESS_MAIN(TestPartnerProfiles)
#include "tst_partnerprofiles.moc"
