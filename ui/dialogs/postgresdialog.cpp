#include "dialogs/postgresdialog.h"

#include "display/storeurl.h"
#include "store/storelocation.h"

#include <QComboBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QSpinBox>
#include <QUrl>
#include <QUrlQuery>

namespace once::ui {

namespace {

const QString SslMode = QStringLiteral("sslmode");

} // namespace

PostgresDialog::PostgresDialog(QWidget *parent) : ConnectionDialog(parent)
{
    setWindowTitle(tr("Open PostgreSQL Store"));
    m_host = new QLineEdit(QStringLiteral("localhost"));
    m_host->setObjectName(QStringLiteral("host"));
    // libpq's high availability (Patroni and the like): it tries the hosts in turn.
    m_host->setToolTip(tr("One host, or several separated by commas (db1,db2:5433): libpq tries them in turn. "
                          "Add target_session_attrs=read-write to the URL to reach the primary."));
    m_port = new QSpinBox;
    m_port->setObjectName(QStringLiteral("port"));
    m_port->setRange(1, 65535);
    m_port->setValue(5432);
    m_port->setGroupSeparatorShown(false);
    m_database = new QLineEdit(QStringLiteral("once"));
    m_database->setObjectName(QStringLiteral("database"));
    m_user = new QLineEdit(qEnvironmentVariable("USER"));
    m_user->setObjectName(QStringLiteral("user"));
    m_password = new QLineEdit;
    m_password->setObjectName(QStringLiteral("password"));
    m_password->setEchoMode(QLineEdit::Password);
    m_password->setPlaceholderText(tr("from PGPASSWORD or ~/.pgpass if empty"));
    m_sslMode = new QComboBox;
    m_sslMode->setObjectName(QStringLiteral("sslMode"));
    m_sslMode->addItem(tr("libpq's default (prefer)"), QString());
    for (const char *mode : {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"})
        m_sslMode->addItem(QString::fromLatin1(mode), QString::fromLatin1(mode));

    auto *form = new QFormLayout;
    form->addRow(tr("&Host:"), m_host);
    form->addRow(tr("&Port:"), m_port);
    form->addRow(tr("&Database:"), m_database);
    form->addRow(tr("&User:"), m_user);
    form->addRow(tr("Pass&word:"), m_password);
    addRememberRow(form);
    form->addRow(tr("&SSL mode:"), m_sslMode);
    layOut(
        form, tr("Store:"),
        tr("The password is never shown or logged. Remembered, it is kept in the system keychain, never in "
           "the console's settings. Otherwise it is used for this session only, and Open Recent reconnects "
           "without it: libpq then looks in PGPASSWORD and ~/.pgpass, as psql does."),
        460);

    for (QLineEdit *field : {m_host, m_database, m_user, m_password})
        connect(field, &QLineEdit::textChanged, this, &PostgresDialog::updateOk);
    connect(m_port, &QSpinBox::valueChanged, this, &PostgresDialog::updateOk);
    connect(m_sslMode, &QComboBox::currentIndexChanged, this, &PostgresDialog::updateOk);
    updateOk();
}

void PostgresDialog::setUrl(const QString &text)
{
    QString error;
    const auto location = isPostgresUrl(text) ? StoreLocation::parse(text, &error) : std::nullopt;
    if (!location || location->servers.isEmpty())
        return;
    // One server: its host and port in their fields. Several: all in the host field, the
    // port field for those that have the default.
    const int port = location->servers.constFirst().port;
    QStringList hosts;
    for (const auto &server : location->servers)
        hosts << (server.port == port ? server.host : server.host + QLatin1Char(':') + QString::number(server.port));
    m_host->setText(hosts.join(QLatin1Char(',')));
    m_port->setValue(port);
    m_database->setText(location->database);
    m_user->setText(location->user);
    m_password->setText(location->password);
    m_otherOptions.clear();
    m_sslMode->setCurrentIndex(0);
    const qsizetype queryStart = text.indexOf(QLatin1Char('?'));
    const QUrlQuery query(queryStart < 0 ? QString() : text.mid(queryStart + 1));
    for (const auto &[key, value] : query.queryItems(QUrl::FullyDecoded)) {
        if (key == SslMode) {
            const int index = m_sslMode->findData(value);
            m_sslMode->setCurrentIndex(index >= 0 ? index : 0);
        } else {
            m_otherOptions.append({key, value});
        }
    }
    updateOk();
}

QString PostgresDialog::url() const
{
    QUrl url;
    url.setScheme(QStringLiteral("postgres"));
    // Several hosts are no authority QUrl can hold: the URL takes a stand-in host, which
    // the host list replaces once it is written.
    const QString hostText = m_host->text().trimmed();
    const bool severalHosts = hostText.contains(QLatin1Char(','));
    const QString standIn = QStringLiteral("hosts.invalid");
    url.setHost(severalHosts ? standIn : hostText);
    url.setPort(m_port->value());
    url.setUserName(m_user->text().trimmed(), QUrl::DecodedMode);
    if (!m_password->text().isEmpty())
        url.setPassword(m_password->text(), QUrl::DecodedMode);
    url.setPath(QLatin1Char('/') + m_database->text().trimmed(), QUrl::DecodedMode);
    QUrlQuery query;
    if (const QString mode = m_sslMode->currentData().toString(); !mode.isEmpty())
        query.addQueryItem(SslMode, mode);
    for (const auto &[key, value] : m_otherOptions)
        query.addQueryItem(key, value);
    if (!query.isEmpty())
        url.setQuery(query);
    QString text = url.toString(QUrl::FullyEncoded);
    if (severalHosts) {
        QStringList servers;
        for (const QString &host : hostText.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            const QString server = host.trimmed();
            servers << (server.contains(QLatin1Char(':')) ? server
                                                          : server + QLatin1Char(':') + QString::number(m_port->value()));
        }
        text.replace(standIn + QLatin1Char(':') + QString::number(m_port->value()), servers.join(QLatin1Char(',')));
    }
    return text;
}

void PostgresDialog::updateOk()
{
    const bool complete = !m_host->text().trimmed().isEmpty() && !m_database->text().trimmed().isEmpty() &&
                          !m_database->text().contains(QLatin1Char('/')) &&
                          !m_user->text().trimmed().isEmpty();
    setPreview(complete ? storeDisplayName(url()) : tr("(host, database and user are needed)"), complete);
}

} // namespace once::ui
