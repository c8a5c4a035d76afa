#include "dialogs/connectiondialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace once::ui {

ConnectionDialog::ConnectionDialog(QWidget *parent) : QDialog(parent)
{
    m_preview = new QLabel;
    m_preview->setObjectName(QStringLiteral("preview"));
    m_preview->setWordWrap(true);
    m_preview->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_remember = new QCheckBox(tr("&Remember the password in the system keychain"));
    m_remember->setObjectName(QStringLiteral("remember"));
    m_keychainNote = new QLabel;
    m_keychainNote->setObjectName(QStringLiteral("keychainNote"));
    m_keychainNote->setWordWrap(true);
    m_keychainNote->hide();
    m_buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel);
    connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

void ConnectionDialog::layOut(QFormLayout *form, const QString &previewLabel, const QString &passwordNote,
                              int minimumWidth)
{
    form->addRow(previewLabel, m_preview);
    auto *note = new QLabel(passwordNote);
    note->setObjectName(QStringLiteral("passwordNote"));
    note->setWordWrap(true);
    note->setForegroundRole(QPalette::PlaceholderText);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(note);
    layout->addWidget(m_buttons);
    setMinimumWidth(minimumWidth);
}

void ConnectionDialog::addRememberRow(QFormLayout *form)
{
    form->addRow(QString(), m_remember);
    form->addRow(QString(), m_keychainNote);
}

void ConnectionDialog::setKeychain(SavedPasswords::Keychain keychain, const QString &unavailableReason,
                                   bool remembered, const QString &message)
{
    const bool unavailable = keychain == SavedPasswords::Keychain::Unavailable;
    m_remember->setEnabled(!unavailable);
    m_remember->setChecked(remembered && !unavailable);
    QStringList notes;
    if (!message.isEmpty())
        notes << message;
    if (unavailable) {
        notes << tr("No system keychain is available (%1), so the password cannot be remembered: the console "
                    "asks for it each time.")
                     .arg(unavailableReason);
        m_remember->setToolTip(notes.constLast());
    } else {
        m_remember->setToolTip(tr("Kept in the system keychain, never in the console's settings"));
    }
    m_keychainNote->setText(notes.join(QLatin1Char(' ')));
    m_keychainNote->setVisible(!notes.isEmpty());
}

bool ConnectionDialog::rememberPassword() const
{
    return m_remember->isEnabled() && m_remember->isChecked();
}

void ConnectionDialog::setPreview(const QString &text, bool openable)
{
    m_buttons->button(QDialogButtonBox::Open)->setEnabled(openable);
    m_preview->setText(text);
}

} // namespace once::ui
