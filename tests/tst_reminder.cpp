// Reminder validation, RFC 3339 parsing and send-key derivation.
#include "model/reminder.h"
#include "text/strictjson.h"

#include <algorithm>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QTest>
#include <QUrl>

using namespace once;

namespace {

QJsonObject validObject()
{
    return QJsonObject{
        {QStringLiteral("user_id"), QStringLiteral("u-42")},
        {QStringLiteral("reminder_id"), QStringLiteral("r-7")},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
        {QStringLiteral("destination"), QStringLiteral("+15550100")},
        {QStringLiteral("body"), QStringLiteral("Take your medicine")},
    };
}

QByteArray line(const QJsonObject &object)
{
    return QJsonDocument(object).toJson(QJsonDocument::Compact);
}

QByteArray key(const QString &scheduledAt)
{
    return makeSendKey(QStringLiteral("u"), QStringLiteral("r"), scheduledAt);
}

// A valid message written by hand, with one field's raw JSON text replaced (or added, for a
// field that is not one of the five), for what QJsonDocument cannot write: bad escapes, raw
// control characters, invalid UTF-8, duplicate names. `extra` is raw text put before the
// closing brace (starting with a comma).
QByteArray rawWith(const char *field, const QByteArray &rawValue, const QByteArray &extra = {})
{
    const std::pair<const char *, QByteArray> fields[] = {
        {"user_id", QByteArrayLiteral(R"("u-42")")},
        {"reminder_id", QByteArrayLiteral(R"("r-7")")},
        {"scheduled_at", QByteArrayLiteral(R"("2026-12-01T09:00:00Z")")},
        {"destination", QByteArrayLiteral(R"("+15550100")")},
        {"body", QByteArrayLiteral(R"("Take your medicine")")},
    };
    QByteArray text = "{";
    bool replaced = false;
    for (const auto &[name, value] : fields) {
        if (text.size() > 1)
            text += ", ";
        const bool mine = field && qstrcmp(field, name) == 0;
        replaced = replaced || mine;
        text += '"' + QByteArray(name) + "\": " + (mine ? rawValue : value);
    }
    if (field && !replaced)
        text += ", \"" + QByteArray(field) + "\": " + rawValue;
    return text + extra + '}';
}

// "k0": 0, "k1": 1, ... as the members of an object, without its braces.
QByteArray manyNames(int count)
{
    QByteArrayList members;
    for (int i = 0; i < count; ++i)
        members.append("\"k" + QByteArray::number(i) + "\": " + QByteArray::number(i));
    return members.join(", ");
}

QByteArray nested(int depth)
{
    return QByteArray(depth, '[') + QByteArray(depth, ']');
}

} // namespace

class TestReminder : public QObject
{
    Q_OBJECT

private slots:
    void parsesValidReminder();
    void keepsUnknownFieldsInPayload();
    void parsesExpiresAt();
    void rejectsInvalidReminder_data();
    void rejectsInvalidReminder();
    void acceptsMessageAtSizeLimit();
    void rejectsMessageOverSizeLimit();
    void parsesRfc3339_data();
    void parsesRfc3339();
    void rejectsBadTimestamps_data();
    void rejectsBadTimestamps();
    void sendKeyComparison_data();
    void sendKeyComparison();
    void sendKeyIsEmptyForBadTime();
    void parsedSendKeyMatchesMakeSendKey();
    void idsWithColonsCannotCollide();
    void recurringReminderHasOneKeyPerOccurrence();
    void sendKeyIsPureAscii_data();
    void sendKeyIsPureAscii();
    void sendKeyOfValidInputIsUnchanged_data();
    void sendKeyOfValidInputIsUnchanged();
    void refusesWhatIsNotExactlyUnderstood_data();
    void refusesWhatIsNotExactlyUnderstood();
    void acceptsOddButValidMessages_data();
    void acceptsOddButValidMessages();
    void sizeLimitExcludesTheLineEnding();
    void sendKeyRefusesIdsThatAreNotText();
    void randomIdsRoundTripThroughTheKey();
    void parseSendKeyRefusesOtherSpellings_data();
    void parseSendKeyRefusesOtherSpellings();
    void timesAreReadAsTheGrammarReadsThem();
    void membersAreReadAsQtReadsThem();
};

void TestReminder::parsesValidReminder()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T10:00:00+01:00"));
    object.insert(QStringLiteral("channel"), QStringLiteral("sms"));
    object.insert(QStringLiteral("event_id"), QStringLiteral("evt-1"));
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    QVERIFY(result.error.isEmpty());
    const Reminder &r = *result.reminder;
    QCOMPARE(r.userId, QStringLiteral("u-42"));
    QCOMPARE(r.reminderId, QStringLiteral("r-7"));
    QCOMPARE(r.destination, QStringLiteral("+15550100"));
    QCOMPARE(r.channel, QStringLiteral("sms"));
    QCOMPARE(r.eventId, QStringLiteral("evt-1"));
    QCOMPARE(r.scheduledAt.timeSpec(), Qt::UTC);
    QCOMPARE(r.scheduledAt, QDateTime(QDate(2026, 12, 1), QTime(9, 0), Qt::UTC));
    QCOMPARE(r.sendKey, QByteArray("u-42:r-7:2026-12-01T09:00:00Z"));
    // The payload is the compact JSON object, and it parses back to the same object.
    QVERIFY(!r.payload.contains('\n'));
    QCOMPARE(QJsonDocument::fromJson(r.payload).object(), object);
}

// expires_at says until when the reminder is worth sending; it is no part of the key (the
// same send with another expiry is the same send), and may equal scheduled_at.
void TestReminder::parsesExpiresAt()
{
    QJsonObject object = validObject();
    const auto plain = parseReminder(line(object));
    QVERIFY2(plain.reminder, qPrintable(plain.error));
    QVERIFY(plain.reminder->expiresAt.isNull());
    object.insert(QStringLiteral("expires_at"), QStringLiteral("2026-12-01T12:30:00.250+02:00"));
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    QCOMPARE(result.reminder->expiresAt, QDateTime(QDate(2026, 12, 1), QTime(10, 30, 0, 250), Qt::UTC));
    QCOMPARE(result.reminder->sendKey, plain.reminder->sendKey);
    object.insert(QStringLiteral("expires_at"), QStringLiteral("2026-12-01T09:00:00Z"));
    const auto same = parseReminder(line(object));
    QVERIFY2(same.reminder, qPrintable(same.error));
    QCOMPARE(same.reminder->expiresAt, same.reminder->scheduledAt);
    object.insert(QStringLiteral("expires_at"), QJsonValue::Null);
    const auto null = parseReminder(line(object));
    QVERIFY2(null.reminder, qPrintable(null.error));
    QVERIFY(null.reminder->expiresAt.isNull());
}

void TestReminder::keepsUnknownFieldsInPayload()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("priority"), 3);
    object.insert(QStringLiteral("meta"), QJsonObject{{QStringLiteral("campaign"), QStringLiteral("winter")}});
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    const QJsonObject forwarded = QJsonDocument::fromJson(result.reminder->payload).object();
    QCOMPARE(forwarded.value(QStringLiteral("priority")).toInt(), 3);
    QCOMPARE(forwarded.value(QStringLiteral("meta")).toObject().value(QStringLiteral("campaign")).toString(),
             QStringLiteral("winter"));
    QCOMPARE(forwarded.value(QStringLiteral("body")).toString(), QStringLiteral("Take your medicine"));
    // Optional fields that were absent stay empty.
    QVERIFY(result.reminder->channel.isEmpty());
    QVERIFY(result.reminder->eventId.isEmpty());
}

void TestReminder::rejectsInvalidReminder_data()
{
    QTest::addColumn<QByteArray>("input");
    QTest::addColumn<QString>("errorMentions");

    for (const char *field : {"user_id", "reminder_id", "scheduled_at", "destination", "body"}) {
        QJsonObject missing = validObject();
        missing.remove(QLatin1String(field));
        QTest::addRow("missing %s", field) << line(missing) << QStringLiteral("missing field \"%1\"").arg(QLatin1String(field));

        QJsonObject number = validObject();
        number.insert(QLatin1String(field), 12);
        QTest::addRow("non-string %s", field)
            << line(number) << QStringLiteral("field \"%1\" must be a non-empty string").arg(QLatin1String(field));
    }
    QJsonObject nullUser = validObject();
    nullUser.insert(QStringLiteral("user_id"), QJsonValue::Null);
    QTest::newRow("null user_id") << line(nullUser) << QStringLiteral("missing field \"user_id\"");
    QJsonObject emptyBody = validObject();
    emptyBody.insert(QStringLiteral("body"), QString());
    QTest::newRow("empty body") << line(emptyBody) << QStringLiteral("\"body\" must be a non-empty string");
    QJsonObject arrayDestination = validObject();
    arrayDestination.insert(QStringLiteral("destination"), QJsonArray{QStringLiteral("a")});
    QTest::newRow("array destination") << line(arrayDestination) << QStringLiteral("\"destination\"");
    QJsonObject numberChannel = validObject();
    numberChannel.insert(QStringLiteral("channel"), 5);
    QTest::newRow("non-string channel") << line(numberChannel) << QStringLiteral("field \"channel\" must be a string");
    QJsonObject boolEvent = validObject();
    boolEvent.insert(QStringLiteral("event_id"), true);
    QTest::newRow("non-string event_id") << line(boolEvent) << QStringLiteral("field \"event_id\" must be a string");
    QJsonObject badTime = validObject();
    badTime.insert(QStringLiteral("scheduled_at"), QStringLiteral("yesterday"));
    QTest::newRow("bad scheduled_at") << line(badTime) << QStringLiteral("scheduled_at \"yesterday\" is not an RFC 3339");
    // expires_at is read as strictly as scheduled_at, and must not come before it.
    const auto expiring = [](const QJsonValue &expiresAt) {
        QJsonObject object = validObject();
        object.insert(QStringLiteral("expires_at"), expiresAt);
        return line(object);
    };
    QTest::newRow("expires_at before scheduled_at")
        << expiring(QStringLiteral("2026-12-01T08:59:59.999Z"))
        << QStringLiteral("expires_at \"2026-12-01T08:59:59.999Z\" is before scheduled_at \"2026-12-01T09:00:00Z\"");
    QTest::newRow("expires_at before scheduled_at, by its offset")
        << expiring(QStringLiteral("2026-12-01T09:30:00+01:00")) << QStringLiteral("is before scheduled_at");
    QTest::newRow("expires_at without an offset")
        << expiring(QStringLiteral("2026-12-01T10:00:00")) << QStringLiteral("expires_at \"2026-12-01T10:00:00\" is not an RFC 3339");
    QTest::newRow("expires_at month 13")
        << expiring(QStringLiteral("2026-13-01T00:00:00Z")) << QStringLiteral("expires_at \"2026-13-01T00:00:00Z\" is not an RFC 3339");
    QTest::newRow("empty expires_at") << expiring(QString()) << QStringLiteral("expires_at \"\" is not an RFC 3339");
    QTest::newRow("non-string expires_at") << expiring(1767258000) << QStringLiteral("field \"expires_at\" must be a string");
    QTest::newRow("long expires_at") << expiring(QString(QStringLiteral("2026-12-01T10:00:00.") + QString(60, QLatin1Char('0')) + QLatin1Char('Z')))
                                     << QStringLiteral("field \"expires_at\" is 81 characters, over the limit of 64");

    QTest::newRow("malformed JSON") << QByteArray(R"({"user_id": "u", )") << QStringLiteral("malformed JSON");
    QTest::newRow("not JSON at all") << QByteArray("hello") << QStringLiteral("malformed JSON");
    QTest::newRow("empty line") << QByteArray() << QStringLiteral("malformed JSON");
    QTest::newRow("JSON array") << QByteArray(R"([{"user_id": "u"}])") << QStringLiteral("must be a JSON object");
    // Valid JSON of another kind is said to be that, not malformed.
    QTest::newRow("JSON string") << QByteArray(R"("just text")") << QStringLiteral("must be a JSON object");
    QTest::newRow("JSON number") << QByteArray("42") << QStringLiteral("must be a JSON object");
    QTest::newRow("JSON null") << QByteArray("null") << QStringLiteral("must be a JSON object");
}

void TestReminder::rejectsInvalidReminder()
{
    QFETCH(QByteArray, input);
    QFETCH(QString, errorMentions);
    const auto result = parseReminder(input);
    QVERIFY(!result.reminder);
    // "|" separates acceptable alternatives.
    const QStringList alternatives = errorMentions.split(QLatin1Char('|'));
    QVERIFY2(std::any_of(alternatives.begin(), alternatives.end(),
                         [&](const QString &text) { return result.error.contains(text); }),
             qPrintable(QStringLiteral("error \"%1\" lacks \"%2\"").arg(result.error, errorMentions)));
    QVERIFY(!result.error.contains(QLatin1Char('\n')));
}

void TestReminder::acceptsMessageAtSizeLimit()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("body"), QString());
    const qsizetype overhead = line(object).size();
    object.insert(QStringLiteral("body"), QString(MaxMessageBytes - overhead, QLatin1Char('x')));
    const QByteArray input = line(object);
    QCOMPARE(input.size(), MaxMessageBytes);
    const auto result = parseReminder(input);
    QVERIFY2(result.reminder, qPrintable(result.error));
    QCOMPARE(result.reminder->payload.size(), MaxMessageBytes);
}

void TestReminder::rejectsMessageOverSizeLimit()
{
    for (const qsizetype bodySize : {MaxMessageBytes, MaxMessageBytes + 1, 2 * MaxMessageBytes}) {
        QJsonObject object = validObject();
        object.insert(QStringLiteral("body"), QString(bodySize, QLatin1Char('x')));
        const QByteArray input = line(object);
        QVERIFY(input.size() > MaxMessageBytes);
        const auto result = parseReminder(input);
        QVERIFY(!result.reminder);
        QVERIFY2(result.error.contains(QLatin1String("over the 256 KiB limit")), qPrintable(result.error));
    }
    // One byte over the limit, even though the body itself is smaller than the limit.
    QJsonObject object = validObject();
    object.insert(QStringLiteral("body"), QString());
    const qsizetype overhead = line(object).size();
    object.insert(QStringLiteral("body"), QString(MaxMessageBytes - overhead + 1, QLatin1Char('x')));
    const QByteArray input = line(object);
    QCOMPARE(input.size(), MaxMessageBytes + 1);
    QVERIFY(!parseReminder(input).reminder);
}

void TestReminder::parsesRfc3339_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("canonical");
    QTest::addColumn<QDateTime>("utc");

    const auto at = [](int y, int mo, int d, int h, int mi, int s, int ms) {
        return QDateTime(QDate(y, mo, d), QTime(h, mi, s, ms), Qt::UTC);
    };
    QTest::newRow("Z") << QStringLiteral("2026-12-01T09:00:00Z") << QStringLiteral("2026-12-01T09:00:00Z")
                       << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("lower-case z and t") << QStringLiteral("2026-12-01t09:00:00z")
                                        << QStringLiteral("2026-12-01T09:00:00Z") << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("+01:00") << QStringLiteral("2026-12-01T10:00:00+01:00") << QStringLiteral("2026-12-01T09:00:00Z")
                            << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("+00:00") << QStringLiteral("2026-12-01T09:00:00+00:00") << QStringLiteral("2026-12-01T09:00:00Z")
                            << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("-05:30 crosses midnight") << QStringLiteral("2026-12-31T20:00:00-05:30")
                                             << QStringLiteral("2027-01-01T01:30:00Z") << at(2027, 1, 1, 1, 30, 0, 0);
    QTest::newRow("+14:00 previous day") << QStringLiteral("2026-03-01T05:00:00+14:00")
                                         << QStringLiteral("2026-02-28T15:00:00Z") << at(2026, 2, 28, 15, 0, 0, 0);
    QTest::newRow("fraction .5") << QStringLiteral("2026-12-01T09:00:00.5Z")
                                 << QStringLiteral("2026-12-01T09:00:00.5Z") << at(2026, 12, 1, 9, 0, 0, 500);
    QTest::newRow("fraction .500") << QStringLiteral("2026-12-01T09:00:00.500Z")
                                   << QStringLiteral("2026-12-01T09:00:00.5Z") << at(2026, 12, 1, 9, 0, 0, 500);
    QTest::newRow("fraction .000 dropped") << QStringLiteral("2026-12-01T09:00:00.000Z")
                                           << QStringLiteral("2026-12-01T09:00:00Z") << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("fraction .123456789") << QStringLiteral("2026-12-01T09:00:00.123456789+02:00")
                                         << QStringLiteral("2026-12-01T07:00:00.123456789Z")
                                         << at(2026, 12, 1, 7, 0, 0, 123);
    QTest::newRow("leap day") << QStringLiteral("2028-02-29T12:00:00Z") << QStringLiteral("2028-02-29T12:00:00Z")
                              << at(2028, 2, 29, 12, 0, 0, 0);
    QTest::newRow("space separator") << QStringLiteral("2026-12-01 09:00:00Z") << QStringLiteral("2026-12-01T09:00:00Z")
                                     << at(2026, 12, 1, 9, 0, 0, 0);
    // A leap second keeps its :60 in the key; the instant, which QDateTime cannot write
    // as :60, is the last millisecond before it.
    QTest::newRow("leap second") << QStringLiteral("2016-12-31T23:59:60Z") << QStringLiteral("2016-12-31T23:59:60Z")
                                 << at(2016, 12, 31, 23, 59, 59, 999);
    QTest::newRow("leap second ahead of UTC") << QStringLiteral("2017-01-01T00:59:60+01:00")
                                              << QStringLiteral("2016-12-31T23:59:60Z") << at(2016, 12, 31, 23, 59, 59, 999);
    QTest::newRow("leap second with a fraction") << QStringLiteral("2015-06-30T23:59:60.250Z")
                                                 << QStringLiteral("2015-06-30T23:59:60.25Z") << at(2015, 6, 30, 23, 59, 59, 999);
    QTest::newRow("ten fraction digits") << QStringLiteral("2026-12-01T09:00:00.1234567891Z")
                                         << QStringLiteral("2026-12-01T09:00:00.1234567891Z") << at(2026, 12, 1, 9, 0, 0, 123);
    QTest::newRow("zeros past nine digits") << QStringLiteral("2026-12-01T09:00:00.1000000000000Z")
                                            << QStringLiteral("2026-12-01T09:00:00.1Z") << at(2026, 12, 1, 9, 0, 0, 100);
    QTest::newRow("year 0000 behind UTC") << QStringLiteral("0000-12-31T23:30:00-01:00")
                                          << QStringLiteral("0001-01-01T00:30:00Z") << at(1, 1, 1, 0, 30, 0, 0);
}

void TestReminder::parsesRfc3339()
{
    QFETCH(QString, text);
    QFETCH(QString, canonical);
    QFETCH(QDateTime, utc);
    QString why;
    const auto parsed = parseRfc3339(text, &why);
    QVERIFY2(parsed, qPrintable(why));
    QCOMPARE(parsed->canonical, canonical);
    QCOMPARE(parsed->utc.toMSecsSinceEpoch(), utc.toMSecsSinceEpoch());
    QCOMPARE(parsed->utc.timeSpec(), Qt::UTC);
}

void TestReminder::rejectsBadTimestamps_data()
{
    QTest::addColumn<QString>("text");
    QTest::newRow("yesterday") << QStringLiteral("yesterday");
    QTest::newRow("empty") << QString();
    QTest::newRow("no offset") << QStringLiteral("2026-12-01T09:00:00");
    QTest::newRow("date only") << QStringLiteral("2026-12-01");
    QTest::newRow("no seconds") << QStringLiteral("2026-12-01T09:00Z");
    QTest::newRow("month 13") << QStringLiteral("2026-13-01T09:00:00Z");
    QTest::newRow("month 00") << QStringLiteral("2026-00-01T09:00:00Z");
    QTest::newRow("February 30") << QStringLiteral("2026-02-30T09:00:00Z");
    QTest::newRow("February 29 of a common year") << QStringLiteral("2026-02-29T09:00:00Z");
    QTest::newRow("hour 24") << QStringLiteral("2026-12-01T24:00:00Z");
    QTest::newRow("minute 60") << QStringLiteral("2026-12-01T09:60:00Z");
    QTest::newRow("offset +25:00") << QStringLiteral("2026-12-01T09:00:00+25:00");
    QTest::newRow("offset +01:60") << QStringLiteral("2026-12-01T09:00:00+01:60");
    QTest::newRow("offset without colon") << QStringLiteral("2026-12-01T09:00:00+0100");
    QTest::newRow("empty fraction") << QStringLiteral("2026-12-01T09:00:00.Z");
    QTest::newRow("trailing text") << QStringLiteral("2026-12-01T09:00:00Z tomorrow");
    QTest::newRow("leading space") << QStringLiteral(" 2026-12-01T09:00:00Z");
    // "$" matched before a final newline.
    QTest::newRow("newline after Z") << QStringLiteral("2026-12-01T09:00:00Z\n");
    QTest::newRow("newline after the offset") << QStringLiteral("2026-12-01T10:00:00+01:00\n");
    QTest::newRow("carriage return after Z") << QStringLiteral("2026-12-01T09:00:00Z\r");
    QTest::newRow("second 60 in mid-morning") << QStringLiteral("2026-12-01T09:00:60Z");
    QTest::newRow("second 60 not on a month's last day") << QStringLiteral("2026-12-01T23:59:60Z");
    QTest::newRow("second 60 at 23:59 local, not UTC") << QStringLiteral("2016-12-31T23:59:60+01:00");
    QTest::newRow("second 61") << QStringLiteral("2016-12-31T23:59:61Z");
    QTest::newRow("year 0001 ahead of UTC") << QStringLiteral("0001-01-01T00:30:00+01:00");
    QTest::newRow("year 9999 behind UTC") << QStringLiteral("9999-12-31T23:30:00-01:00");
    QTest::newRow("year 0000 in UTC") << QStringLiteral("0000-06-01T00:00:00Z");
    QTest::newRow("Arabic-Indic fraction") << QStringLiteral("2026-12-01T09:00:00.\u0665Z");
    QTest::newRow("fullwidth year") << QStringLiteral("\uFF12\uFF10\uFF12\uFF16-12-01T09:00:00Z");
}

void TestReminder::rejectsBadTimestamps()
{
    QFETCH(QString, text);
    QString why;
    QVERIFY(!parseRfc3339(text, &why));
    QVERIFY(!why.isEmpty());
    QVERIFY(makeSendKey(QStringLiteral("u"), QStringLiteral("r"), text).isEmpty());
}

void TestReminder::sendKeyComparison_data()
{
    QTest::addColumn<QString>("first");
    QTest::addColumn<QString>("second");
    QTest::addColumn<bool>("same");
    QTest::newRow("+01:00 equals Z") << QStringLiteral("2026-12-01T10:00:00+01:00")
                                     << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow("-08:00 equals Z") << QStringLiteral("2026-12-01T01:00:00-08:00")
                                     << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow("+00:00 equals Z") << QStringLiteral("2026-12-01T09:00:00+00:00")
                                     << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow(".500 equals .5") << QStringLiteral("2026-12-01T09:00:00.500Z")
                                    << QStringLiteral("2026-12-01T09:00:00.5Z") << true;
    QTest::newRow(".0 equals none") << QStringLiteral("2026-12-01T09:00:00.0Z")
                                    << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow(".5 differs from .6") << QStringLiteral("2026-12-01T09:00:00.5Z")
                                        << QStringLiteral("2026-12-01T09:00:00.6Z") << false;
    QTest::newRow(".5 differs from none") << QStringLiteral("2026-12-01T09:00:00.5Z")
                                          << QStringLiteral("2026-12-01T09:00:00Z") << false;
    QTest::newRow("one second apart") << QStringLiteral("2026-12-01T09:00:00Z")
                                      << QStringLiteral("2026-12-01T09:00:01Z") << false;
    QTest::newRow("same wall clock, other offset") << QStringLiteral("2026-12-01T09:00:00+01:00")
                                                   << QStringLiteral("2026-12-01T09:00:00Z") << false;
}

void TestReminder::sendKeyComparison()
{
    QFETCH(QString, first);
    QFETCH(QString, second);
    QFETCH(bool, same);
    const QByteArray a = key(first);
    const QByteArray b = key(second);
    QVERIFY(!a.isEmpty());
    QVERIFY(!b.isEmpty());
    QCOMPARE(a == b, same);
}

void TestReminder::sendKeyIsEmptyForBadTime()
{
    QVERIFY(makeSendKey(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00")).isEmpty());
    QCOMPARE(makeSendKey(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z")),
             QByteArray("u:r:2026-12-01T09:00:00Z"));
}

void TestReminder::parsedSendKeyMatchesMakeSendKey()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("user_id"), QStringLiteral("a:b c"));
    object.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T04:00:00.250-05:00"));
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    QCOMPARE(result.reminder->sendKey,
             makeSendKey(QStringLiteral("a:b c"), QStringLiteral("r-7"), QStringLiteral("2026-12-01T09:00:00.25Z")));
    QCOMPARE(result.reminder->sendKey, QByteArray("a%3Ab%20c:r-7:2026-12-01T09:00:00.25Z"));
    QCOMPARE(result.reminder->scheduledAt.toMSecsSinceEpoch(),
             QDateTime(QDate(2026, 12, 1), QTime(9, 0, 0, 250), Qt::UTC).toMSecsSinceEpoch());
}

void TestReminder::idsWithColonsCannotCollide()
{
    const QString at = QStringLiteral("2026-12-01T09:00:00Z");
    const QByteArray first = makeSendKey(QStringLiteral("a:b"), QStringLiteral("c"), at);
    const QByteArray second = makeSendKey(QStringLiteral("a"), QStringLiteral("b:c"), at);
    QVERIFY(!first.isEmpty());
    QVERIFY(first != second);
    // Percent signs are encoded too, so an id that looks encoded stays distinct.
    const QByteArray third = makeSendKey(QStringLiteral("a%3Ab"), QStringLiteral("c"), at);
    QVERIFY(third != first);
    QVERIFY(third != second);
    // Each id decodes back from its own field: the first two ':' are the only separators.
    for (const auto &[user, reminder, k] : {std::tuple{QStringLiteral("a:b"), QStringLiteral("c"), first},
                                            std::tuple{QStringLiteral("a"), QStringLiteral("b:c"), second},
                                            std::tuple{QStringLiteral("a%3Ab"), QStringLiteral("c"), third}}) {
        const QList<QByteArray> parts = k.split(':');
        QVERIFY(parts.size() >= 3);
        QCOMPARE(QUrl::fromPercentEncoding(parts.at(0)), user);
        QCOMPARE(QUrl::fromPercentEncoding(parts.at(1)), reminder);
        QVERIFY(k.endsWith(":2026-12-01T09:00:00Z"));
    }
}

void TestReminder::recurringReminderHasOneKeyPerOccurrence()
{
    QJsonObject monday = validObject();
    monday.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-11-30T08:00:00Z"));
    QJsonObject tuesday = monday;
    tuesday.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T08:00:00Z"));
    const auto first = parseReminder(line(monday));
    const auto second = parseReminder(line(tuesday));
    QVERIFY(first.reminder && second.reminder);
    QCOMPARE(first.reminder->userId, second.reminder->userId);
    QCOMPARE(first.reminder->reminderId, second.reminder->reminderId);
    QVERIFY(first.reminder->sendKey != second.reminder->sendKey);
    // The same occurrence published again gets the same key.
    QCOMPARE(parseReminder(line(monday)).reminder->sendKey, first.reminder->sendKey);
}

void TestReminder::sendKeyIsPureAscii_data()
{
    QTest::addColumn<QString>("userId");
    QTest::addColumn<QString>("reminderId");
    QTest::newRow("plain") << QStringLiteral("u-1") << QStringLiteral("r_2.x~y");
    QTest::newRow("accents") << QStringLiteral("Zoë") << QStringLiteral("rappel-été");
    QTest::newRow("CJK and emoji") << QStringLiteral("用户") << QStringLiteral("\U0001F514");
    QTest::newRow("spaces, slashes, colons") << QStringLiteral("a b/c:d") << QStringLiteral("?x=1&y=%");
    QTest::newRow("control characters") << QStringLiteral("a\nb\tc") << QStringLiteral("\x01");
}

void TestReminder::sendKeyIsPureAscii()
{
    QFETCH(QString, userId);
    QFETCH(QString, reminderId);
    const QByteArray k = makeSendKey(userId, reminderId, QStringLiteral("2026-12-01T10:00:00.5+01:00"));
    QVERIFY(!k.isEmpty());
    for (const char c : k)
        QVERIFY2(uchar(c) > 0x20 && uchar(c) < 0x7f, k.constData());
    // The key survives a round trip through Latin-1 (how the store keeps it) unchanged.
    QCOMPARE(QString::fromLatin1(k).toLatin1(), k);
    const QList<QByteArray> parts = k.split(':');
    QCOMPARE(QUrl::fromPercentEncoding(parts.at(0)), userId);
    QCOMPARE(QUrl::fromPercentEncoding(parts.at(1)), reminderId);
}

// Stores hold the keys of messages already taken: a message redelivered after an upgrade
// must get the key it got before, byte for byte, or it would be sent a second time. These
// are the keys this program derived before the parser was made strict.
void TestReminder::sendKeyOfValidInputIsUnchanged_data()
{
    QTest::addColumn<QString>("userId");
    QTest::addColumn<QString>("reminderId");
    QTest::addColumn<QString>("scheduledAt");
    QTest::addColumn<QByteArray>("expected");
    QTest::newRow("plain, offset") << QStringLiteral("u-42") << QStringLiteral("dentist")
                                   << QStringLiteral("2026-12-01T10:00:00+01:00")
                                   << QByteArray("u-42:dentist:2026-12-01T09:00:00Z");
    QTest::newRow("reserved characters") << QStringLiteral("a:b c") << QStringLiteral("r/1?x=%")
                                         << QStringLiteral("2026-12-01T04:00:00.250-05:00")
                                         << QByteArray("a%3Ab%20c:r%2F1%3Fx%3D%25:2026-12-01T09:00:00.25Z");
    QTest::newRow("accents, astral, nine digits, lower case")
        << QStringLiteral("Zoë") << QStringLiteral("\U0001F514") << QStringLiteral("2028-02-29t23:59:59.123456789z")
        << QByteArray("Zo%C3%AB:%F0%9F%94%94:2028-02-29T23:59:59.123456789Z");
    QTest::newRow("unreserved, CJK, new year") << QStringLiteral("~._-") << QStringLiteral("用户")
                                               << QStringLiteral("2026-12-31T20:00:00-05:30")
                                               << QByteArray("~._-:%E7%94%A8%E6%88%B7:2027-01-01T01:30:00Z");
    QTest::newRow("first instant of year 1") << QStringLiteral("0001 start") << QStringLiteral("x")
                                             << QStringLiteral("0001-01-01T01:00:00+01:00")
                                             << QByteArray("0001%20start:x:0001-01-01T00:00:00Z");
    QTest::newRow("last second of year 9999") << QStringLiteral("end") << QStringLiteral("x")
                                              << QStringLiteral("9999-12-31T22:59:59.900-01:00")
                                              << QByteArray("end:x:9999-12-31T23:59:59.9Z");
    QTest::newRow("space separator") << QStringLiteral("%41") << QStringLiteral("%")
                                     << QStringLiteral("2026-12-01 09:00:00Z")
                                     << QByteArray("%2541:%25:2026-12-01T09:00:00Z");
    QTest::newRow("control characters") << QStringLiteral("a\nb") << QStringLiteral("\x7f")
                                        << QStringLiteral("2026-12-01T09:00:00.000000000Z")
                                        << QByteArray("a%0Ab:%7F:2026-12-01T09:00:00Z");
}

void TestReminder::sendKeyOfValidInputIsUnchanged()
{
    QFETCH(QString, userId);
    QFETCH(QString, reminderId);
    QFETCH(QString, scheduledAt);
    QFETCH(QByteArray, expected);
    QCOMPARE(makeSendKey(userId, reminderId, scheduledAt), expected);
    // The key decodes into exactly these ids and the canonical time.
    const auto parts = parseSendKey(expected);
    QVERIFY(parts);
    QCOMPARE(parts->userId, userId);
    QCOMPARE(parts->reminderId, reminderId);
    QCOMPARE(parts->canonicalTime, parseRfc3339(scheduledAt)->canonical);
    // And the parser derives the same key from a message carrying them.
    QJsonObject object = validObject();
    object.insert(QStringLiteral("user_id"), userId);
    object.insert(QStringLiteral("reminder_id"), reminderId);
    object.insert(QStringLiteral("scheduled_at"), scheduledAt);
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    QCOMPARE(result.reminder->sendKey, expected);
}

void TestReminder::refusesWhatIsNotExactlyUnderstood_data()
{
    QTest::addColumn<QByteArray>("input");
    QTest::addColumn<QString>("errorMentions");

    // Ids that are not Unicode text: Qt would turn each lone surrogate into '?' or U+FFFD
    // before percent-encoding, so all of these would share a key with each other and
    // with a literal '?' or U+FFFD.
    QTest::newRow("lone high surrogate in user_id") << rawWith("user_id", R"("\ud800")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("lone low surrogate in user_id") << rawWith("user_id", R"("\udfff")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("lone surrogate in reminder_id") << rawWith("reminder_id", R"("r\uDC00")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("reversed pair") << rawWith("reminder_id", R"("\udc00\ud800")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("high surrogate then a letter") << rawWith("user_id", R"("\ud800A")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("high surrogate then an escaped letter")
        << rawWith("user_id", R"("\ud800\u0041")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("high surrogate at the end of the string") << rawWith("user_id", R"("x\uD83D")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("lone surrogate in the body") << rawWith("body", R"("\ud800")") << QStringLiteral("unpaired surrogate");
    QTest::newRow("lone surrogate in a forwarded field") << rawWith("meta", R"({"a": ["\udfff"]})") << QStringLiteral("unpaired surrogate");
    QTest::newRow("lone surrogate in a field name") << rawWith("\\ud800", "1") << QStringLiteral("unpaired surrogate");

    // Raw control characters inside strings: JSON forbids them, Qt takes them.
    QTest::newRow("raw NUL in the body") << rawWith("body", QByteArrayLiteral("\"a\0b\""))
                                         << QStringLiteral("control character U+0000 inside a string at offset");
    QTest::newRow("raw NUL in user_id") << rawWith("user_id", QByteArrayLiteral("\"\0\""))
                                        << QStringLiteral("control character U+0000 inside a string at offset 13");
    QTest::newRow("raw tab in destination") << rawWith("destination", "\"+1\t555\"") << QStringLiteral("control character U+0009");
    QTest::newRow("raw newline in reminder_id") << rawWith("reminder_id", "\"r\n7\"") << QStringLiteral("control character U+000A");
    QTest::newRow("raw U+001F in a name") << rawWith("x\x1f", "1") << QStringLiteral("control character U+001F");

    // Bytes that are not UTF-8: Qt may replace them, so two different ids could meet.
    QTest::newRow("byte FF in user_id") << rawWith("user_id", "\"u\xff\"") << QStringLiteral("invalid UTF-8 at offset 14");
    QTest::newRow("overlong slash") << rawWith("reminder_id", "\"\xc0\xaf\"") << QStringLiteral("invalid UTF-8");
    QTest::newRow("encoded surrogate") << rawWith("user_id", "\"\xed\xa0\x80\"") << QStringLiteral("invalid UTF-8");
    QTest::newRow("beyond U+10FFFF") << rawWith("body", "\"\xf4\x90\x80\x80\"") << QStringLiteral("invalid UTF-8");
    QTest::newRow("truncated sequence") << rawWith("body", "\"\xe2\x82\"") << QStringLiteral("invalid UTF-8");
    QTest::newRow("stray continuation byte") << rawWith("body", "\"\x80\"") << QStringLiteral("invalid UTF-8");
    QTest::newRow("non-ASCII outside strings") << QByteArray("\xc2\xa0") + rawWith(nullptr, {}) << QStringLiteral("malformed JSON");

    // A raw byte order mark opening a string: Qt's reader drops it, a partner keeps it, so
    // an id "\uFEFFa" written raw would be read as "a" and share its key. Names too.
    QTest::newRow("byte order mark opening user_id") << rawWith("user_id", "\"\xef\xbb\xbf" "a\"")
                                                     << QStringLiteral("byte order mark U+FEFF at the start of a string at offset 13");
    QTest::newRow("reminder_id of one byte order mark") << rawWith("reminder_id", "\"\xef\xbb\xbf\"")
                                                        << QStringLiteral("byte order mark U+FEFF at the start of a string");
    QTest::newRow("byte order mark opening a name")
        << rawWith("body", "\"b\", \"\xef\xbb\xbf" "user_id\": \"someone-else\"")
        << QStringLiteral("byte order mark U+FEFF at the start of a string");

    // Duplicate names: Qt keeps the last, a partner may keep the first, so the ledger and
    // the forwarded payload could disagree.
    QTest::newRow("duplicate user_id") << rawWith("body", R"("b", "user_id": "someone-else")")
                                       << QStringLiteral("duplicate field \"user_id\"");
    QTest::newRow("duplicate through an escape") << rawWith("body", R"("b", "user\u005fid": "someone-else")")
                                                 << QStringLiteral("duplicate field \"user_id\"");
    QTest::newRow("duplicate body") << rawWith("body", R"("b", "body": "other")") << QStringLiteral("duplicate field \"body\"");
    QTest::newRow("duplicate in a nested object") << rawWith("meta", R"({"a": 1, "b": {"c": 1, "c": 2}})")
                                                  << QStringLiteral("duplicate field \"c\"");
    QTest::newRow("duplicate in an object in an array") << rawWith("list", R"([{}, {"a": 1, "a": 1}])")
                                                        << QStringLiteral("duplicate field \"a\"");
    // Past a few names an object's names are compared through a set: the same answers.
    QTest::newRow("duplicate of the first after 31 others")
        << rawWith("meta", "{" + manyNames(32) + R"(, "k0": 0})") << QStringLiteral("duplicate field \"k0\"");
    QTest::newRow("duplicate of the last after 40") << rawWith("meta", "{" + manyNames(41) + R"(, "k40": 0})")
                                                    << QStringLiteral("duplicate field \"k40\"");
    QTest::newRow("duplicate through an escape after 40")
        << rawWith("meta", "{" + manyNames(41) + R"(, "k\u0035": 0})")
        << QStringLiteral("duplicate field \"k5\"");
    QTest::newRow("escaped first, plain after")
        << rawWith("meta", R"({"\u0061": 1, "b": 2, "a": 3})") << QStringLiteral("duplicate field \"a\"");
    QTest::newRow("duplicate name shown on one line") << rawWith("x\\ny", "1", R"(, "x\ny": 2)")
                                                      << QStringLiteral("duplicate field \"x\\ny\"");

    QTest::newRow("nested too deep") << rawWith("meta", nested(64)) << QStringLiteral("nested deeper than 64");
    QTest::newRow("escape \\x") << rawWith("body", R"("\x41")") << QStringLiteral("invalid escape");
    QTest::newRow("escape \\'") << rawWith("body", R"("\'")") << QStringLiteral("invalid escape");
    QTest::newRow("short \\u escape") << rawWith("body", R"("\u12")") << QStringLiteral("invalid escape");
    QTest::newRow("non-hex \\u escape") << rawWith("body", R"("\u12G4")") << QStringLiteral("invalid escape");
    QTest::newRow("unterminated string") << QByteArray(R"({"user_id": "u)") << QStringLiteral("malformed JSON");
    for (const char *number : {"01", "1.", ".5", "+1", "-", "1e", "NaN", "Infinity", "0x10"})
        QTest::addRow("number %s", number) << rawWith("n", number) << QStringLiteral("malformed JSON");
    // Qt's parser, for one, refuses a number a double cannot hold (the forwarded payload
    // would be no object at all to it), and another parser may read infinity or zero.
    for (const char *number :
         {"1e999", "-1e999", "1e-999", "1.7976931348623159e308", "2e-324",
          "0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
          "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
          "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
          "0000000000000000000000000000000000000000000000000000000000000000000000000000000000"
          "1"})
        QTest::addRow("number %.24s", number)
            << rawWith("n", QByteArray("[0, ") + number + "]")
            << QStringLiteral("outside the range of a 64-bit floating-point number at offset");
    QTest::newRow("trailing comma") << rawWith(nullptr, {}, ",") << QStringLiteral("malformed JSON");
    QTest::newRow("single quotes") << rawWith("body", "'b'") << QStringLiteral("malformed JSON");
    QTest::newRow("text after the object") << rawWith(nullptr, {}) + " x" << QStringLiteral("malformed JSON");
    QTest::newRow("two objects") << rawWith(nullptr, {}) + rawWith(nullptr, {}) << QStringLiteral("malformed JSON");
    QTest::newRow("form feed after the object") << rawWith(nullptr, {}) + "\f" << QStringLiteral("malformed JSON");

    // Bounded ids: a key is at most three bytes per byte of UTF-8 in each id.
    QTest::newRow("user_id of 129 bytes") << rawWith("user_id", '"' + QByteArray(129, 'u') + '"')
                                          << QStringLiteral("field \"user_id\" is 129 bytes of UTF-8, over the limit of 128");
    QTest::newRow("reminder_id of 43 euro signs")
        << rawWith("reminder_id", '"' + QByteArray("\xe2\x82\xac").repeated(43) + '"')
        << QStringLiteral("field \"reminder_id\" is 129 bytes of UTF-8, over the limit of 128");
    QTest::newRow("user_id of 120,000 characters") << rawWith("user_id", '"' + QByteArray(120000, 'u') + '"')
                                                   << QStringLiteral("over the limit of 128");
    QTest::newRow("scheduled_at of 65 characters")
        << rawWith("scheduled_at", "\"2026-12-01T09:00:00." + QByteArray(44, '0') + "Z\"")
        << QStringLiteral("field \"scheduled_at\" is 65 characters, over the limit of 64");
    // Text columns cannot hold U+0000 (PostgreSQL refuses it), so one such message would
    // fail a whole batch of claims.
    for (const char *field : {"user_id", "reminder_id", "destination", "channel", "event_id"})
        QTest::addRow("escaped NUL in %s", field) << rawWith(field, R"("a\u0000b")")
                                                  << QStringLiteral("field \"%1\" contains U+0000").arg(QLatin1String(field));

    // Times: the whole text must be the time.
    QTest::newRow("newline after Z") << rawWith("scheduled_at", R"("2026-12-01T09:00:00Z\n")") << QStringLiteral("is not an RFC 3339 time");
    QTest::newRow("newline after the offset") << rawWith("scheduled_at", R"("2026-12-01T10:00:00+01:00\n")")
                                              << QStringLiteral("is not an RFC 3339 time");
    QTest::newRow("Arabic-Indic fraction digit") << rawWith("scheduled_at", R"("2026-12-01T09:00:00.\u0665Z")")
                                                 << QStringLiteral("is not an RFC 3339 time");
    QTest::newRow("year 1 ahead of UTC") << rawWith("scheduled_at", R"("0001-01-01T00:30:00+01:00")")
                                         << QStringLiteral("outside the years 0001 to 9999");
    QTest::newRow("year 9999 behind UTC") << rawWith("scheduled_at", R"("9999-12-31T23:30:00-01:00")")
                                          << QStringLiteral("outside the years 0001 to 9999");
    QTest::newRow("second 60 in mid-morning") << rawWith("scheduled_at", R"("2026-12-01T09:00:60Z")")
                                              << QStringLiteral("leap second");
}

void TestReminder::refusesWhatIsNotExactlyUnderstood()
{
    QFETCH(QByteArray, input);
    QFETCH(QString, errorMentions);
    const auto result = parseReminder(input);
    QVERIFY2(!result.reminder,
             result.reminder ? result.reminder->sendKey.left(200).constData() : "");
    QVERIFY2(result.error.contains(errorMentions),
             qPrintable(QStringLiteral("error \"%1\" lacks \"%2\"").arg(result.error, errorMentions)));
    // One line, short, and nothing in it that a terminal would act on.
    QVERIFY2(result.error.size() < 300, qPrintable(result.error.left(300)));
    for (const QChar c : result.error)
        QVERIFY2(c.unicode() >= 0x20 && c.unicode() != 0x7f, qPrintable(result.error));
}

void TestReminder::acceptsOddButValidMessages_data()
{
    QTest::addColumn<QByteArray>("input");
    QTest::addColumn<QByteArray>("expectedKey");
    const QByteArray at = ":2026-12-01T09:00:00Z";
    QTest::newRow("astral character as a surrogate pair escape")
        << rawWith("reminder_id", R"("\ud83d\udd14")") << "u-42:%F0%9F%94%94" + at;
    QTest::newRow("astral character as UTF-8") << rawWith("reminder_id", "\"\xf0\x9f\x94\x94\"") << "u-42:%F0%9F%94%94" + at;
    QTest::newRow("escaped colon") << rawWith("user_id", R"("a\u003ab")") << "a%3Ab:r-7" + at;
    QTest::newRow("question mark") << rawWith("user_id", R"("?")") << "%3F:r-7" + at;
    QTest::newRow("U+FFFD itself") << rawWith("user_id", R"("\ufffd")") << "%EF%BF%BD:r-7" + at;
    QTest::newRow("byte order mark escaped, opening user_id") << rawWith("user_id", R"("\ufeffu")")
                                                              << "%EF%BB%BFu:r-7" + at;
    QTest::newRow("reminder_id of one escaped byte order mark") << rawWith("reminder_id", R"("\uFEFF")")
                                                                << "u-42:%EF%BB%BF" + at;
    QTest::newRow("escaped control characters") << rawWith("user_id", R"("\t\u001f")") << "%09%1F:r-7" + at;
    QTest::newRow("NUL escaped in the body") << rawWith("body", R"("a\u0000b")") << "u-42:r-7" + at;
    QTest::newRow("user_id of 128 bytes") << rawWith("user_id", '"' + QByteArray(128, 'u') + '"') << QByteArray(128, 'u') + ":r-7" + at;
    QTest::newRow("reminder_id of 42 euro signs and two letters")
        << rawWith("reminder_id", '"' + QByteArray("\xe2\x82\xac").repeated(42) + "ab\"")
        << "u-42:" + QByteArray("%E2%82%AC").repeated(42) + "ab" + at;
    QTest::newRow("scheduled_at of 64 characters") << rawWith("scheduled_at", "\"2026-12-01T09:00:00." + QByteArray(43, '0') + "Z\"")
                                                   << "u-42:r-7" + at;
    QTest::newRow("leap second") << rawWith("scheduled_at", R"("2016-12-31T23:59:60Z")") << QByteArray("u-42:r-7:2016-12-31T23:59:60Z");
    QTest::newRow("leap second with an offset") << rawWith("scheduled_at", R"("1990-12-31T15:59:60.5-08:00")")
                                                << QByteArray("u-42:r-7:1990-12-31T23:59:60.5Z");
    QTest::newRow("twelve fraction digits") << rawWith("scheduled_at", R"("2026-12-01T09:00:00.123456789012Z")")
                                            << QByteArray("u-42:r-7:2026-12-01T09:00:00.123456789012Z");
    QTest::newRow("same names in two objects") << rawWith("meta", R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}]})")
                                               << "u-42:r-7" + at;
    QTest::newRow("a thousand different names")
        << rawWith("meta", "{" + manyNames(1000) + "}") << "u-42:r-7" + at;
    QTest::newRow("names that differ only past an escape")
        << rawWith("meta", R"({"a\u0062": 1, "ac": 2, "a\u0063d": 3})") << "u-42:r-7" + at;
    QTest::newRow("nested 63 deep") << rawWith("meta", nested(63)) << "u-42:r-7" + at;
    QTest::newRow("numbers and literals") << rawWith("n", R"([0, -0, 1.5e+3, -2E-7, 10, true, false, null, "", {}])")
                                          << "u-42:r-7" + at;
    // The edges of what a double holds: the largest, the smallest subnormal, zeros of any
    // exponent, and more digits than it keeps.
    QTest::newRow("numbers at a double's edges")
        << rawWith("n",
                   "[1.7976931348623157e308, -4.9e-324, 0e999, -0.0e-99999, 123456789012345678901234567890]")
        << "u-42:r-7" + at;
    QTest::newRow("whitespace around") << " \t\r\n" + rawWith(nullptr, {}) + " \t" << "u-42:r-7" + at;
    QTest::newRow("ended by CRLF") << rawWith(nullptr, {}) + "\r\n" << "u-42:r-7" + at;
}

void TestReminder::acceptsOddButValidMessages()
{
    QFETCH(QByteArray, input);
    QFETCH(QByteArray, expectedKey);
    const auto result = parseReminder(input);
    QVERIFY2(result.reminder, qPrintable(result.error));
    QCOMPARE(result.reminder->sendKey, expectedKey);
    QCOMPARE(result.reminder->payload, input.trimmed());
    // And the key decodes into exactly the ids read.
    const auto parts = parseSendKey(expectedKey);
    QVERIFY(parts);
    QCOMPARE(parts->userId, result.reminder->userId);
    QCOMPARE(parts->reminderId, result.reminder->reminderId);
}

// The 256 KiB are the message's: a line ending after it does not count.
void TestReminder::sizeLimitExcludesTheLineEnding()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("body"), QString());
    const qsizetype overhead = line(object).size();
    object.insert(QStringLiteral("body"), QString(MaxMessageBytes - overhead, QLatin1Char('x')));
    const QByteArray message = line(object);
    QCOMPARE(message.size(), MaxMessageBytes);
    for (const QByteArray &ending : {QByteArray("\n"), QByteArray("\r\n")}) {
        const auto result = parseReminder(message + ending);
        QVERIFY2(result.reminder, qPrintable(result.error));
        QCOMPARE(result.reminder->payload, message);
    }
    // Anything else after it still counts.
    QVERIFY(!parseReminder(message + ' ').reminder);
    QVERIFY(!parseReminder(message + "\n\n").reminder);
}

void TestReminder::sendKeyRefusesIdsThatAreNotText()
{
    const QString at = QStringLiteral("2026-12-01T09:00:00Z");
    const QByteArray question = makeSendKey(QStringLiteral("?"), QStringLiteral("r"), at);
    QCOMPARE(question, QByteArray("%3F:r:2026-12-01T09:00:00Z"));
    for (const char16_t unit : {u'\xd800', u'\xdbff', u'\xdc00', u'\xdfff'}) {
        const QString lone(QChar{unit});
        QVERIFY(makeSendKey(lone, QStringLiteral("r"), at).isEmpty());
        QVERIFY(makeSendKey(QStringLiteral("u"), QStringLiteral("a") + lone, at).isEmpty());
    }
    // Reversed, a pair is two unpaired surrogates.
    QVERIFY(makeSendKey(QStringLiteral("\U0001F514").right(1) + QStringLiteral("\U0001F514").left(1), QStringLiteral("r"), at)
                .isEmpty());
    QVERIFY(!makeSendKey(QStringLiteral("\U0001F514"), QStringLiteral("r"), at).isEmpty());
}

namespace {

// An id made to find collisions: pieces that percent-encoding treats specially, ids
// that look encoded, every plane of Unicode, empty-looking and long ones.
QString randomId(QRandomGenerator &random)
{
    static const QStringList pieces{
        QStringLiteral(":"),    QStringLiteral("%"),      QStringLiteral("?"),          QStringLiteral("%3A"),
        QStringLiteral("%25"),  QStringLiteral("%3a"),    QStringLiteral("%2"),         QStringLiteral("::"),
        QStringLiteral("/"),    QStringLiteral("#"),      QStringLiteral("&"),          QStringLiteral("="),
        QStringLiteral("+"),    QStringLiteral(" "),      QStringLiteral("~"),          QStringLiteral("."),
        QStringLiteral("-"),    QStringLiteral("_"),      QStringLiteral("a"),          QStringLiteral("Z"),
        QStringLiteral("0"),    QStringLiteral("\\"),    QStringLiteral("\""),         QStringLiteral("\t"),
        QStringLiteral("\n"),   QStringLiteral("\x7f"),   QStringLiteral("é"),          QStringLiteral("用"),
        QStringLiteral("\uFFFD"), QStringLiteral("\uFFFF"), QStringLiteral("\U0001F514"), QStringLiteral("\U0010FFFF"),
        QStringLiteral("\u00A0"), QStringLiteral("\u200B"), QStringLiteral("\uFEFF"),
        QStringLiteral("2026-12-01T09:00:00Z"),
    };
    QString id;
    switch (random.bounded(4)) {
    case 0: // pieces
        for (int n = int(random.bounded(1, 12)); n > 0; --n)
            id += pieces.at(int(random.bounded(pieces.size())));
        break;
    case 1: // any scalar values, astral ones included
        for (int n = int(random.bounded(1, 20)); n > 0; --n) {
            char32_t code;
            do {
                code = char32_t(random.bounded(random.bounded(2) ? 0x800u : 0x110000u));
            } while (code >= 0xd800 && code <= 0xdfff);
            id += QString::fromUcs4(&code, 1);
        }
        break;
    case 2: // empty-looking
        id = QStringList{QStringLiteral(" "), QStringLiteral("\u200B"), QStringLiteral("\u3000"), QStringLiteral("\t"),
                         QStringLiteral("%20"), QStringLiteral("+")}
                 .at(int(random.bounded(6)))
                 .repeated(int(random.bounded(1, 4)));
        break;
    default: // long: up to the 128 bytes a message may carry
        while (id.toUtf8().size() < MaxIdBytes - 4)
            id += pieces.at(int(random.bounded(pieces.size())));
        break;
    }
    return id;
}

// A valid RFC 3339 time within the years 0001 to 9999 in UTC, sometimes a leap second,
// sometimes with more fraction digits than nine.
QString randomTime(QRandomGenerator &random)
{
    const auto two = [](int n) { return QStringLiteral("%1").arg(n, 2, 10, QLatin1Char('0')); };
    for (;;) {
        const int year = int(random.bounded(random.bounded(4) ? 1970 : 1, random.bounded(4) ? 2100 : 10000));
        const int month = int(random.bounded(1, 13));
        const int day = int(random.bounded(1, QDate(year, month, 1).daysInMonth() + 1));
        QString text = QStringLiteral("%1-%2-%3T").arg(year, 4, 10, QLatin1Char('0')).arg(two(month), two(day));
        const bool leap = random.bounded(20) == 0;
        text += leap ? QStringLiteral("23:59:60")
                     : two(int(random.bounded(24))) + QLatin1Char(':') + two(int(random.bounded(60))) + QLatin1Char(':')
                           + two(int(random.bounded(60)));
        if (random.bounded(2)) {
            text += QLatin1Char('.');
            for (int n = int(random.bounded(1, 16)); n > 0; --n)
                text += QChar(u'0' + random.bounded(10));
        }
        if (leap || random.bounded(3) == 0) {
            text += random.bounded(2) ? QStringLiteral("Z") : QStringLiteral("+00:00");
        } else {
            text += random.bounded(2) ? QLatin1Char('+') : QLatin1Char('-');
            text += two(int(random.bounded(24))) + QLatin1Char(':') + two(int(random.bounded(60)));
        }
        // Day 29 to 31 of a month with a leap second only where it is the last day, and an
        // offset may push year 1 or 9999 out of range: draw again.
        if (parseRfc3339(text))
            return text;
    }
}

} // namespace

// The key is injective: it decodes back into exactly the ids and the time it was made
// from, and no two different triples (user, reminder, UTC instant as written) share one.
void TestReminder::randomIdsRoundTripThroughTheKey()
{
    QRandomGenerator random(20261201); // fixed: a failure repeats
    constexpr int Count = 20000;
    QHash<QByteArray, QStringList> triples;
    QStringList users, reminders;
    for (int i = 0; i < Count; ++i) {
        QString userId = randomId(random);
        QString reminderId = randomId(random);
        // Now and then, move a piece from one id to the other across the separator, the
        // way two different triples would most likely meet.
        if (i % 7 == 0 && !users.isEmpty()) {
            const QString other = users.at(int(random.bounded(users.size()))) + QLatin1Char(':')
                                  + reminders.at(int(random.bounded(reminders.size())));
            const qsizetype cut = random.bounded(other.size() + 1);
            userId = other.left(cut);
            reminderId = other.mid(cut);
            if (!userId.isValidUtf16() || !reminderId.isValidUtf16())
                continue; // cut inside a pair: not text, and makeSendKey refuses it (tested above)
        }
        users << userId;
        reminders << reminderId;
        const QString time = randomTime(random);
        const QString canonical = parseRfc3339(time)->canonical;
        const QByteArray key = makeSendKey(userId, reminderId, time);
        QVERIFY2(!key.isEmpty(), qPrintable(time));
        for (const char c : key)
            QVERIFY2(uchar(c) > 0x20 && uchar(c) < 0x7f, key.constData());

        const auto parts = parseSendKey(key);
        QVERIFY2(parts, key.constData());
        QCOMPARE(parts->userId, userId);
        QCOMPARE(parts->reminderId, reminderId);
        QCOMPARE(parts->canonicalTime, canonical);

        const QStringList triple{userId, reminderId, canonical};
        if (const auto seen = triples.constFind(key); seen != triples.cend()) {
            QVERIFY2(*seen == triple, qPrintable(QStringLiteral("%1 and %2 share the key %3")
                                                     .arg(triple.join(u'|'), seen->join(u'|'), QString::fromLatin1(key))));
        }
        triples.insert(key, triple);

        // A message with these ids gets the same key, as long as it may carry them.
        if (userId.isEmpty() || reminderId.isEmpty() || userId.contains(QChar(0)) || reminderId.contains(QChar(0))
            || time.size() > MaxScheduledAtChars)
            continue;
        QJsonObject object = validObject();
        object.insert(QStringLiteral("user_id"), userId);
        object.insert(QStringLiteral("reminder_id"), reminderId);
        object.insert(QStringLiteral("scheduled_at"), time);
        const auto parsed = parseReminder(line(object));
        // Too long, or opening with a byte order mark written raw (as Qt writes it; Qt's
        // reader would drop it): refused.
        if (userId.toUtf8().size() > MaxIdBytes || reminderId.toUtf8().size() > MaxIdBytes
            || userId.startsWith(QChar(0xfeff)) || reminderId.startsWith(QChar(0xfeff))) {
            QVERIFY(!parsed.reminder);
            continue;
        }
        QVERIFY2(parsed.reminder, qPrintable(parsed.error));
        QCOMPARE(parsed.reminder->sendKey, key);
    }
    // The generator made what it was meant to: mostly distinct triples.
    QVERIFY2(triples.size() > Count * 9 / 10, qPrintable(QString::number(triples.size())));
}

void TestReminder::parseSendKeyRefusesOtherSpellings_data()
{
    QTest::addColumn<QByteArray>("key");
    QTest::newRow("lower-case hex") << QByteArray("a%3ab:r:2026-12-01T09:00:00Z");
    QTest::newRow("unreserved letter encoded") << QByteArray("%41:r:2026-12-01T09:00:00Z");
    QTest::newRow("raw space") << QByteArray("a b:r:2026-12-01T09:00:00Z");
    QTest::newRow("raw percent") << QByteArray("100%:r:2026-12-01T09:00:00Z");
    QTest::newRow("not UTF-8") << QByteArray("%FF:r:2026-12-01T09:00:00Z");
    QTest::newRow("encoded surrogate") << QByteArray("%ED%A0%80:r:2026-12-01T09:00:00Z");
    QTest::newRow("time with an offset") << QByteArray("u:r:2026-12-01T10:00:00+01:00");
    QTest::newRow("trailing fraction zero") << QByteArray("u:r:2026-12-01T09:00:00.50Z");
    QTest::newRow("lower-case z") << QByteArray("u:r:2026-12-01T09:00:00z");
    QTest::newRow("newline after the time") << QByteArray("u:r:2026-12-01T09:00:00Z\n");
    QTest::newRow("no time") << QByteArray("u:r");
    QTest::newRow("no separator") << QByteArray("u");
    QTest::newRow("empty") << QByteArray();
}

void TestReminder::parseSendKeyRefusesOtherSpellings()
{
    QFETCH(QByteArray, key);
    QVERIFY(!parseSendKey(key));
}

namespace {

// RFC 3339's date-time written as a regular expression, which is how parseRfc3339 read
// it before it scanned by hand: what the two make of a text must be the same. With the
// same checks of the values after it: the instant and the canonical text, or nothing.
std::optional<std::pair<qint64, QString>> readByTheGrammar(const QString &text)
{
    static const QRegularExpression pattern(QStringLiteral(
        R"(\A([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))\z)"));
    const auto m = pattern.match(text);
    if (!m.hasMatch())
        return std::nullopt;
    const auto number = [&m](int group) { return m.captured(group).toInt(); };
    const QDate date(number(1) == 0 ? -1 : number(1), number(2), number(3));
    const bool leapSecond = number(6) == 60;
    const QTime time(number(4), number(5), leapSecond ? 59 : number(6));
    if (!date.isValid() || !time.isValid() ||
        (m.captured(8).isEmpty() && (number(10) > 23 || number(11) > 59)))
        return std::nullopt;
    const int offset =
        m.captured(8).isEmpty() ? (number(10) * 60 + number(11)) * 60 * (m.captured(9) == u"-" ? -1 : 1) : 0;
    const QDateTime utc = QDateTime(date, time, Qt::OffsetFromUTC, offset).toUTC();
    if (utc.date().year() < 1 || utc.date().year() > 9999)
        return std::nullopt;
    if (leapSecond && (utc.time() != QTime(23, 59, 59) || utc.date().day() != utc.date().daysInMonth()))
        return std::nullopt;
    QString fraction = m.captured(7);
    while (fraction.endsWith(u'0'))
        fraction.chop(1);
    const qint64 ms = leapSecond ? 999 : fraction.left(3).leftJustified(3, u'0').toInt();
    QString canonical = utc.toString(QStringLiteral("yyyy-MM-ddTHH:mm:")) +
                        (leapSecond ? QStringLiteral("60") : utc.toString(QStringLiteral("ss")));
    if (!fraction.isEmpty())
        canonical += u'.' + fraction;
    return std::pair{utc.toMSecsSinceEpoch() + ms, canonical + u'Z'};
}

} // namespace

// Near misses of valid times (a character changed, added, dropped or repeated, among
// them the ones a lenient reader lets through: non-ASCII digits, line ends, a missing
// colon) are read exactly as the grammar reads them.
void TestReminder::timesAreReadAsTheGrammarReadsThem()
{
    QRandomGenerator random(20261204); // fixed: a failure repeats
    const QString alphabet = QStringLiteral("0123456789-:.TtZz+ \n\r\u0665\uFF10x");
    int accepted = 0;
    for (int i = 0; i < 100000; ++i) {
        QString text = randomTime(random);
        for (int edits = int(random.bounded(4)); edits > 0 && !text.isEmpty(); --edits) {
            const auto at = qsizetype(random.bounded(int(text.size())));
            switch (random.bounded(4)) {
            case 0:
                text[at] = alphabet.at(random.bounded(int(alphabet.size())));
                break;
            case 1:
                text.insert(at, alphabet.at(random.bounded(int(alphabet.size()))));
                break;
            case 2:
                text.remove(at, 1);
                break;
            default:
                text.insert(at, text.mid(at, random.bounded(1, 4)));
                break;
            }
        }
        const auto expected = readByTheGrammar(text);
        const auto parsed = parseRfc3339(text);
        QVERIFY2(bool(parsed) == bool(expected), qPrintable(text));
        if (!parsed)
            continue;
        ++accepted;
        QCOMPARE(parsed->canonical, expected->second);
        QCOMPARE(parsed->utc.toMSecsSinceEpoch(), expected->first);
    }
    // Both sides of the line were tried.
    QVERIFY2(accepted > 20000 && accepted < 80000, qPrintable(QString::number(accepted)));
}

namespace {

// Random JSON for the members' reader: the reminder's names (some written with escapes,
// some twice), and values of every kind, strings full of escapes, surrogate pairs, lone
// surrogates, noncharacters, byte order marks, NUL and raw bytes that are not UTF-8.
class RandomJson
{
public:
    explicit RandomJson(QRandomGenerator &random) : m_random(random) {}

    QByteArray text()
    {
        QByteArray out;
        if (chance(20))
            value(&out, 0);
        else
            object(&out, 0);
        // And now and then a byte changed, dropped or added anywhere.
        for (int edits = chance(4) ? int(m_random.bounded(1, 4)) : 0; edits > 0 && !out.isEmpty(); --edits) {
            const auto at = qsizetype(m_random.bounded(int(out.size())));
            const char byte = char(m_random.bounded(256));
            switch (m_random.bounded(3)) {
            case 0:
                out[at] = byte;
                break;
            case 1:
                out.remove(at, 1);
                break;
            default:
                out.insert(at, byte);
                break;
            }
        }
        return out;
    }

private:
    bool chance(int oneIn) { return m_random.bounded(oneIn) == 0; }

    void object(QByteArray *out, int depth)
    {
        static const QByteArrayList names = {"user_id", "reminder_id", "scheduled_at",  "destination", "body",
                                             "channel", "event_id",    "user\\u005fid", "\\u0062ody",  "meta",
                                             "x"};
        *out += '{';
        for (int members = int(m_random.bounded(depth == 0 ? 7 : 3)), i = 0; i < members; ++i) {
            if (i > 0)
                *out += ", ";
            *out += '"' + names.at(m_random.bounded(int(names.size()))) + "\": ";
            value(out, depth + 1);
        }
        *out += '}';
    }

    void value(QByteArray *out, int depth)
    {
        switch (m_random.bounded(depth > 2 ? 5 : 7)) {
        case 0:
            *out += "null";
            break;
        case 1:
            *out += QByteArray::number(m_random.bounded(-1000, 1000));
            break;
        case 2:
            *out += chance(2) ? "true" : "false";
            break;
        case 5:
            object(out, depth + 1);
            break;
        case 6:
            *out += '[';
            value(out, depth + 1);
            *out += ']';
            break;
        default:
            string(out);
            break;
        }
    }

    void string(QByteArray *out)
    {
        static const QByteArrayList pieces = {"a",
                                              "Z",
                                              "0",
                                              " ",
                                              ":",
                                              "%",
                                              "\\\"",
                                              "\\\\",
                                              "\\/",
                                              "\\b",
                                              "\\f",
                                              "\\n",
                                              "\\r",
                                              "\\t",
                                              "\\u0000",
                                              "\\u0041",
                                              "\\u00e9",
                                              "\\uFEFF",
                                              "\\ufeff",
                                              "\\uFFFF",
                                              "\\uD83D\\uDD14",
                                              "\\u20AC",
                                              "\xc3\xa9",
                                              "\xe2\x82\xac",
                                              "\xf0\x9f\x94\x94",
                                              "\xef\xbf\xbf",
                                              "\xef\xb7\x90",
                                              "\x7f"};
        // What the check refuses, one string in ten.
        static const QByteArrayList refused = {
            "\\ud800", "\\udc00", "\xef\xbb\xbf", "\xed\xa0\x80", "\xc0\xaf", "\xff", "\x01", "\\x41", "\\'"};
        *out += '"';
        const int length = int(m_random.bounded(6));
        const int refusedAt = chance(10) ? int(m_random.bounded(length + 1)) : -1;
        for (int i = 0; i <= length; ++i) {
            if (i == refusedAt)
                *out += refused.at(m_random.bounded(int(refused.size())));
            else if (i < length)
                *out += pieces.at(m_random.bounded(int(pieces.size())));
        }
        *out += '"';
    }

    QRandomGenerator &m_random;
};

} // namespace

// The members a reminder is made of are read in the strict check's own pass: what it
// reads must be what Qt's parser reads from every text that passes the check, and a text
// that fails is refused with the check's own words.
void TestReminder::membersAreReadAsQtReadsThem()
{
    QRandomGenerator random(20261204); // fixed: a failure repeats
    RandomJson json(random);
    const QLatin1StringView names[] = {QLatin1StringView("user_id"), QLatin1StringView("body"),
                                       QLatin1StringView("channel"), QLatin1StringView("meta")};
    int passed = 0;
    int strings = 0;
    for (int i = 0; i < 100000; ++i) {
        const QByteArray text = json.text();
        std::array<JsonMember, 4> members{{{names[0]}, {names[1]}, {names[2]}, {names[3]}}};
        bool isObject = false;
        const QString problem = readStrictJsonObject(text, members, &isObject);
        QCOMPARE(problem, strictJsonProblem(text));
        if (!problem.isEmpty())
            continue;
        ++passed;
        QJsonParseError error;
        const QJsonDocument document = QJsonDocument::fromJson(text, &error);
        // Qt's parser takes only an object or an array as the whole text.
        if (error.error != QJsonParseError::NoError) {
            QVERIFY2(!isObject, text.constData());
            continue;
        }
        QCOMPARE(isObject, document.isObject());
        for (const JsonMember &member : members) {
            const QJsonValue value = document.object().value(member.name);
            const auto kind = value.isUndefined() ? JsonMember::Kind::Absent
                              : value.isNull()    ? JsonMember::Kind::Null
                              : value.isString()  ? JsonMember::Kind::String
                                                  : JsonMember::Kind::Other;
            QVERIFY2(member.kind == kind, text.constData());
            QCOMPARE(member.text, value.toString());
            strings += kind == JsonMember::Kind::String ? 1 : 0;
        }
    }
    // Both sides of the check were tried, and many strings read.
    qInfo() << passed << "texts passed the check," << strings << "strings read";
    QVERIFY2(passed > 10000 && passed < 90000, qPrintable(QString::number(passed)));
    QVERIFY2(strings > 8000, qPrintable(QString::number(strings)));
}

QTEST_GUILESS_MAIN(TestReminder)
#include "tst_reminder.moc"
