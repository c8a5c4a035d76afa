#include "dialogs/brokerqueuedialog.h"

#include "display/queueurl.h"
#include "display/statuscolors.h"

#include "queues/brokerqueue.h"
#include "queues/queuebackend.h"

#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>

namespace once::ui {

BrokerQueueDialog::BrokerQueueDialog(QWidget *parent) : ConnectionDialog(parent)
{
    setWindowTitle(tr("Open Broker Queue"));
    m_url = new QLineEdit;
    m_url->setObjectName(QStringLiteral("url"));
    m_url->setPlaceholderText(queueBackends().constFirst()->exampleUrl);
    m_url->setClearButtonEnabled(true);
    m_password = new QLineEdit;
    m_password->setObjectName(QStringLiteral("password"));
    m_password->setEchoMode(QLineEdit::Password);
    m_password->setPlaceholderText(tr("if the broker asks for one"));

    // Every registered backend's URL, as the registry describes it.
    QString formatText;
    for (const QueueBackend *backend : queueBackends()) {
        formatText += QStringLiteral("<b>%1:</b> <code>%2</code>")
                          .arg(backend->name.toHtmlEscaped(), backend->urlSyntax.toHtmlEscaped());
        if (!backend->urlNotes.isEmpty())
            formatText += QStringLiteral("<br>&nbsp;&nbsp;") + backend->urlNotes.toHtmlEscaped();
        formatText += QStringLiteral("<br>");
    }
    auto *formats = new QLabel(
        formatText + tr("The ledger stays in the open store; only the queue is read at the broker."));
    formats->setObjectName(QStringLiteral("formats"));
    formats->setWordWrap(true);
    formats->setTextFormat(Qt::RichText);
    formats->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto *form = new QFormLayout;
    form->addRow(tr("&URL:"), m_url);
    form->addRow(QString(), formats);
    form->addRow(tr("Pass&word:"), m_password);
    addRememberRow(form);
    layOut(
        form, tr("Queue:"),
        tr("The password is never shown or logged. Remembered, it is kept in the system keychain, never in "
           "the console's settings. Otherwise it is used for this session only, and Open Recent Queue "
           "reconnects with the password from $ONCE_QUEUE when that names the same queue, as once does."),
        620);

    connect(m_url, &QLineEdit::textChanged, this, &BrokerQueueDialog::updateOk);
    connect(m_url, &QLineEdit::editingFinished, this, &BrokerQueueDialog::movePasswordOutOfUrl);
    connect(m_password, &QLineEdit::textChanged, this, &BrokerQueueDialog::updateOk);
    updateOk();
}

void BrokerQueueDialog::setUrl(const QString &url)
{
    m_url->setText(queueUrlWithoutPassword(url));
    m_password->setText(queuePassword(url));
    updateOk();
}

QString BrokerQueueDialog::url() const
{
    const QString typed = m_url->text().trimmed();
    return m_password->text().isEmpty()
               ? typed
               : queueUrlWithPassword(queueUrlWithoutPassword(typed), m_password->text());
}

// A password pasted into the URL would stay readable on the screen: once the field is
// left, it moves into the masked one (which it then overrides, unless that has one).
void BrokerQueueDialog::movePasswordOutOfUrl()
{
    const QString typed = m_url->text().trimmed();
    const QString password = queuePassword(typed);
    if (password.isEmpty())
        return;
    if (m_password->text().isEmpty())
        m_password->setText(password);
    m_url->setText(queueUrlWithoutPassword(typed));
}

void BrokerQueueDialog::updateOk()
{
    const QString typed = m_url->text().trimmed();
    QString problem;
    const auto location = typed.isEmpty() ? std::nullopt : QueueLocation::parse(url(), &problem);
    QPalette palette = preview()->palette();
    palette.setColor(QPalette::WindowText, location || typed.isEmpty()
                                               ? this->palette().color(QPalette::WindowText)
                                               : severityTextColor(Severity::Alert, this->palette()));
    preview()->setPalette(palette);
    if (location)
        setPreview(tr("%1 — %2").arg(location->brokerName(), location->displayName()), true);
    else
        setPreview(typed.isEmpty() ? tr("(a queue URL is needed)") : problem, false);
}

} // namespace once::ui
